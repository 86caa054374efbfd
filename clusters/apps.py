from django.apps import AppConfig


class ClustersConfig(AppConfig):
    """The bridge to Kubernetes: clusters, the mirror base model, the kind registry, validation."""

    name = "clusters"
    verbose_name = "Clusters and sync"

    def ready(self) -> None:
        from clusters.sync import metrics, signals  # noqa: F401 - signals connects its receivers

        metrics.register_collectors()
