"""Filters for configs and runs (pages and API)."""

import django_filters

from clusters.web.filtersets import KubeObjectFilterSet
from runs_app.models import InferenceConfig, InferenceRun


class InferenceConfigFilterSet(KubeObjectFilterSet):
    search_fields = ("model_name", "image")

    model_name = django_filters.CharFilter()

    class Meta:
        model = InferenceConfig
        fields = ["cluster", "namespace", "name", "model_name", "sync_state"]


class InferenceRunFilterSet(KubeObjectFilterSet):
    search_fields = ("config_name",)

    config_name = django_filters.CharFilter()
    phase = django_filters.CharFilter()

    class Meta:
        model = InferenceRun
        fields = ["cluster", "namespace", "name", "config_name", "phase", "sync_state"]
