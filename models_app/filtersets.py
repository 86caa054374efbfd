"""Filters for the serving kinds (catalog pages and API)."""

import django_filters

from clusters.web.filtersets import ServingModelFilterSet
from models_app.models import InferenceModel, KubeAIModel, ModelService


class InferenceModelFilterSet(ServingModelFilterSet):
    class Meta:
        model = InferenceModel
        fields = ["cluster", "namespace", "name", "node_pool", "model_name", "sync_state", "ready"]


class KubeAIModelFilterSet(ServingModelFilterSet):
    search_fields = ("model_name", "engine", "url")

    feature = django_filters.CharFilter(method="with_feature", label="Feature (e.g. TextGeneration)")

    class Meta:
        model = KubeAIModel
        fields = ["cluster", "namespace", "name", "engine", "model_name", "sync_state", "ready"]

    def with_feature(self, queryset, name: str, value: str):
        return queryset.filter(features__icontains=f",{value},")


class ModelServiceFilterSet(ServingModelFilterSet):
    accelerator = django_filters.CharFilter()
    phase = django_filters.CharFilter()

    class Meta:
        model = ModelService
        fields = ["cluster", "namespace", "name", "node_pool", "model_name", "sync_state", "ready"]
