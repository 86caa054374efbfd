from django.contrib import admin

from clusters.web.admin import KubeObjectAdmin
from models_app.models import InferenceModel, KubeAIModel, ModelService, UtilizationSortKey


@admin.register(InferenceModel)
class InferenceModelAdmin(KubeObjectAdmin):
    kind_list_display = ("model_name", "node_pool", "memory_bytes_quantity", "ready", "utilization_percent")
    kind_list_filter = ("node_pool", "ready")
    indexed_filters = ("node_pool", "namespace")
    search_fields = ["name", "namespace", "model_name"]
    # utilization changes with every status report: its order is kept apart, as for the catalog
    kept_orders = {"utilization_percent": UtilizationSortKey.ordered_ids}


@admin.register(KubeAIModel)
class KubeAIModelAdmin(KubeObjectAdmin):
    kind_list_display = ("engine", "url", "resource_profile", "running_replicas", "ready")
    kind_list_filter = ("engine", "ready")
    indexed_filters = ("engine", "namespace")
    search_fields = ["name", "namespace", "url"]


@admin.register(ModelService)
class ModelServiceAdmin(KubeObjectAdmin):
    kind_list_display = ("model_name", "accelerator", "running_replicas", "desired_replicas", "gpu_count", "phase")
    kind_list_filter = ("accelerator", "phase", "node_pool")
    indexed_filters = ("accelerator", "phase", "node_pool", "namespace")  # phase's index: migration 0012
    search_fields = ["name", "namespace", "model_name"]

    @admin.display(description="Desired replicas", ordering="replicas")
    def desired_replicas(self, obj: ModelService) -> int | None:
        """The spec's count, named as such beside the running ones (issue 43: a bare "replicas"
        read as what runs)."""
        return obj.replicas
