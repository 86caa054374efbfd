from django.apps import AppConfig


class ClustersConfig(AppConfig):
    """The bridge to Kubernetes: clusters, the mirror base model, the kind registry, validation."""

    name = "clusters"
    verbose_name = "Clusters and sync"

    def ready(self) -> None:
        from clusters import handover, metrics  # noqa: F401 - handover connects its signal receivers

        metrics.register_collectors()
