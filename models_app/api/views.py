"""Thin viewsets: the shared KubeObjectViewSet does the work."""

import yaml
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from clusters.models import AuditEntry
from clusters.sync.audit import Actor
from clusters.validation.schemas import FieldError, ManifestInvalid
from clusters.web.api.exceptions import field_error_detail
from clusters.web.api.permissions import ChangeModelPermission
from clusters.web.api.views import KubeObjectViewSet
from models_app.api.serializers import InferenceModelSerializer, KubeAIModelSerializer, ModelServiceSerializer
from models_app.filtersets import InferenceModelFilterSet, KubeAIModelFilterSet, ModelServiceFilterSet
from models_app.keda import MAX_INT32, ScaledObjectRefused, render_scaled_object
from models_app.models import InferenceModel, KubeAIModel, ModelService
from models_app.wake import WakeRefused, wake


class WakeResultSerializer(serializers.Serializer):
    woken = serializers.DictField(child=serializers.CharField(), help_text="Outcome per woken model.")


OUTPUTS = ("json", "yaml")
REPLICA_PARAMETERS = {"minReplicas": 0, "maxReplicas": 1}  # query parameter: its least value


def _replica_parameter(request: Request, name: str, errors: list[FieldError]) -> int | None:
    """A replica bound from the query (None when not given); a bad one goes to ``errors``, named."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    least = REPLICA_PARAMETERS[name]
    if not raw.isascii() or not raw.isdigit() or not least <= int(raw) <= MAX_INT32:
        errors.append(FieldError(name, raw, f"must be a whole number from {least} to {MAX_INT32}"))
        return None
    return int(raw)


class KedaScaledObjectMixin:
    """``GET <kind>/<id>/keda-scaledobject/``: the KEDA ScaledObject that scales the model's
    Deployment to the portal's desired replicas (models_app/keda.py, docs/autoscaling.md); readable
    by whoever may read the model (another team's model is 404, as every read)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("output", str, enum=OUTPUTS, description="`json` (default) or `yaml` (a file to "
                             "`kubectl apply -f`)."),
            OpenApiParameter("minReplicas", int, description="minReplicaCount, instead of the model's own (KubeAI "
                             "spec.minReplicas; 0 for an InferenceModel; 1 for a ModelService)."),
            OpenApiParameter("maxReplicas", int, description="maxReplicaCount, instead of the model's own (KubeAI "
                             "spec.maxReplicas, else 100; InferenceModel spec.maxReplicas; ModelService "
                             "spec.decode.replicas)."),
        ],
        responses={
            (200, "application/json"): OpenApiResponse(OpenApiTypes.OBJECT, description="The ScaledObject."),
            (200, "application/yaml"): OpenApiResponse(OpenApiTypes.STR, description="The ScaledObject as YAML."),
            409: OpenApiResponse(description="The model has no Deployment in its cluster yet (or several, none "
                                 "the serving role's), its replica bounds leave KEDA nothing to scale, or its "
                                 "cluster refused to list its Deployments; the field and rule are named."),
            503: OpenApiResponse(description="The model's cluster could not be reached."),
        },
    )  # fmt: skip
    @action(detail=True, methods=["get"], url_path="keda-scaledobject", url_name="keda-scaledobject")
    def keda_scaledobject(self, request: Request, pk: str | None = None) -> HttpResponse:
        """A KEDA ScaledObject for this model: its Deployment follows the portal's desired replicas
        (the ``inference_portal_model_desired_replicas`` gauge, through Prometheus)."""
        model = self.get_object()
        output = request.query_params.get("output", "json")
        errors = [] if output in OUTPUTS else [FieldError("output", output, f"must be one of {', '.join(OUTPUTS)}")]
        minimum, maximum = (_replica_parameter(request, name, errors) for name in REPLICA_PARAMETERS)
        if errors:
            raise ManifestInvalid(errors)
        try:
            scaled_object = render_scaled_object(model, minimum, maximum)
        except ScaledObjectRefused as refused:
            return Response(field_error_detail([refused.error]), status=refused.http_status)
        if output == "json":
            return Response(scaled_object)
        response = HttpResponse(yaml.safe_dump(scaled_object, sort_keys=False), content_type="application/yaml")
        response["Content-Disposition"] = f'attachment; filename="{model.name}-scaledobject.yaml"'
        return response


class InferenceModelViewSet(KedaScaledObjectMixin, KubeObjectViewSet):
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


class KubeAIModelViewSet(KedaScaledObjectMixin, KubeObjectViewSet):
    queryset = KubeAIModel.objects.select_related("cluster")
    serializer_class = KubeAIModelSerializer
    filterset_class = KubeAIModelFilterSet


class ModelServiceViewSet(KedaScaledObjectMixin, KubeObjectViewSet):
    queryset = ModelService.objects.select_related("cluster")
    serializer_class = ModelServiceSerializer
    filterset_class = ModelServiceFilterSet
