"""Thin viewsets: the shared KubeObjectViewSet does the work."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.response import Response

from clusters.models import AuditEntry
from clusters.sync.audit import Actor
from clusters.web.api.permissions import ChangeModelPermission
from clusters.web.api.views import KubeObjectViewSet
from models_app.api.serializers import InferenceModelSerializer, KubeAIModelSerializer, ModelServiceSerializer
from models_app.filtersets import InferenceModelFilterSet, KubeAIModelFilterSet, ModelServiceFilterSet
from models_app.models import InferenceModel, KubeAIModel, ModelService
from models_app.wake import WakeRefused, wake


class WakeResultSerializer(serializers.Serializer):
    woken = serializers.DictField(child=serializers.CharField(), help_text="Outcome per woken model.")


class InferenceModelViewSet(KubeObjectViewSet):
    queryset = InferenceModel.objects.select_related("cluster")
    serializer_class = InferenceModelSerializer
    filterset_class = InferenceModelFilterSet

    @extend_schema(
        request=None,
        responses={
            200: WakeResultSerializer,
            400: OpenApiResponse(
                description="Refused: the cluster does not let the portal manage InferenceModels, or a dependency is "
                "missing or cyclic (the message names it)."
            ),
            409: OpenApiResponse(
                description="The cluster refused the change, or the controller did not start the model (admission: "
                "InsufficientMemory, InsufficientGPU, OverQuota; a failed plan); the reason and message are given."
            ),
            422: OpenApiResponse(description="The cluster found the object invalid; its message is given."),
            503: OpenApiResponse(description="The cluster could not be reached."),
        },
    )
    @action(detail=True, methods=["post"], permission_classes=[ChangeModelPermission])
    def wake(self, request, pk=None):
        """Scale a model back up now (its dependencies first); needs the change permission."""
        model = self.get_object()
        try:
            outcomes = wake(model, Actor.from_request(request, AuditEntry.Source.API))
        except WakeRefused as refused:
            return Response({"detail": str(refused)}, status=refused.http_status)
        return Response({"woken": outcomes})


class KubeAIModelViewSet(KubeObjectViewSet):
    queryset = KubeAIModel.objects.select_related("cluster")
    serializer_class = KubeAIModelSerializer
    filterset_class = KubeAIModelFilterSet


class ModelServiceViewSet(KubeObjectViewSet):
    queryset = ModelService.objects.select_related("cluster")
    serializer_class = ModelServiceSerializer
    filterset_class = ModelServiceFilterSet
