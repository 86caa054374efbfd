from django.apps import AppConfig


class ClustersConfig(AppConfig):
    """The bridge to Kubernetes: clusters, the mirror base model, the kind registry; sub-packages kube,
    validation, sync and web (docs/architecture.md)."""

    name = "clusters"
    verbose_name = "Clusters and sync"

    def ready(self) -> None:
        from clusters import timestamps
        from clusters.sync import metrics, signals  # noqa: F401 - signals connects its receivers
        from clusters.web import admin  # noqa: F401 - registers the admin (it lives in web/, not where autodiscover looks)

        metrics.register_collectors()
        timestamps.connect()
