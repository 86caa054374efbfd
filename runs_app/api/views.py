"""Thin viewsets: the shared KubeObjectViewSet does the work."""

from clusters.web.api.views import KubeObjectViewSet
from runs_app.api.serializers import InferenceConfigSerializer, InferenceRunSerializer
from runs_app.filtersets import InferenceConfigFilterSet, InferenceRunFilterSet
from runs_app.models import InferenceConfig, InferenceRun


class InferenceConfigViewSet(KubeObjectViewSet):
    queryset = InferenceConfig.objects.select_related("cluster")
    serializer_class = InferenceConfigSerializer
    filterset_class = InferenceConfigFilterSet


class InferenceRunViewSet(KubeObjectViewSet):
    queryset = InferenceRun.objects.select_related("cluster")
    serializer_class = InferenceRunSerializer
    filterset_class = InferenceRunFilterSet
