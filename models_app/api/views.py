"""Thin viewsets: the shared KubeObjectViewSet does the work."""

from clusters.api.views import KubeObjectViewSet
from models_app.api.serializers import InferenceModelSerializer, KubeAIModelSerializer, ModelServiceSerializer
from models_app.filtersets import InferenceModelFilterSet, KubeAIModelFilterSet, ModelServiceFilterSet
from models_app.models import InferenceModel, KubeAIModel, ModelService


class InferenceModelViewSet(KubeObjectViewSet):
    queryset = InferenceModel.objects.select_related("cluster")
    serializer_class = InferenceModelSerializer
    filterset_class = InferenceModelFilterSet


class KubeAIModelViewSet(KubeObjectViewSet):
    queryset = KubeAIModel.objects.select_related("cluster")
    serializer_class = KubeAIModelSerializer
    filterset_class = KubeAIModelFilterSet


class ModelServiceViewSet(KubeObjectViewSet):
    queryset = ModelService.objects.select_related("cluster")
    serializer_class = ModelServiceSerializer
    filterset_class = ModelServiceFilterSet
