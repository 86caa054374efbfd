from django.contrib import admin

from clusters.web.admin import KubeObjectAdmin
from runs_app.models import InferenceConfig, InferenceRun


@admin.register(InferenceConfig)
class InferenceConfigAdmin(KubeObjectAdmin):
    kind_list_display = ("model_name", "image", "auto_delete_policy")
    kind_list_filter = ("auto_delete_policy",)
    indexed_filters = ("auto_delete_policy", "namespace")  # their indexes: migration 0006
    search_fields = ["name", "namespace", "model_name"]


@admin.register(InferenceRun)
class InferenceRunAdmin(KubeObjectAdmin):
    kind_list_display = ("config_name", "phase", "timeout_seconds", "schedule")
    kind_list_filter = ("phase",)
    indexed_filters = ("phase", "namespace")  # the phase's own index, the namespace's: migration 0006
    search_fields = ["name", "namespace", "config_name"]
