"""Right-sizing API: the policy preview, the report, a model's history, refresh and apply."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.public import CHANGE, VIEW, restrict, visible_cluster_ids
from clusters.sync.audit import Actor
from clusters.validation.quantities import format_bytes
from clusters.web.api.serializers import KubeObjectSerializer, manifest_serializer_for
from scheduler.rightsizing.api.serializers import (
    ObservationSerializer,
    PreviewResultSerializer,
    PreviewSerializer,
    RefreshRequestSerializer,
    RefreshSerializer,
    ReportSerializer,
    report_query_params,
)
from scheduler.rightsizing.apply import apply_recommendation
from scheduler.rightsizing.conf import default_policy
from scheduler.rightsizing.filters import report_filters
from scheduler.rightsizing.kinds import DEFAULT_SLUG, kind_for_slug, may_refresh
from scheduler.rightsizing.models import Observation
from scheduler.rightsizing.policy import evaluate
from scheduler.rightsizing.refresh import refresh_clusters
from scheduler.rightsizing.report import build_report, last_refreshes, pool_totals, row_for


class MayRefresh(BasePermission):
    """Refreshing writes the right-sizing status of every team's objects: staff's (:func:`may_refresh`)."""

    message = "refreshing writes the right-sizing status of every team's objects: staff only"

    def has_permission(self, request, view) -> bool:
        return may_refresh(request.user)


class CanChangeTheKind(BasePermission):
    """Applying edits the object: the same right as editing one of its kind."""

    def has_permission(self, request, view) -> bool:
        needed = kind_for_slug(view.kwargs.get("kind", DEFAULT_SLUG)).permission("change")
        return bool(request.user and request.user.is_authenticated and request.user.has_perm(needed))


class PreviewView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(request=PreviewSerializer, responses=PreviewResultSerializer, tags=["rightsizing"])
    def post(self, request: Request) -> Response:
        """Apply the policy (with optional overrides) to a declared memory and an observed peak."""
        serializer = PreviewSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        verdict = evaluate(data["declaredMemory"], data["observedPeak"], serializer.policy(default_policy()))
        result = {
            "utilizationPercent": verdict.utilization_percent,
            "ratio": verdict.ratio,
            "recommendedMemory": format_bytes(verdict.recommended_bytes),
            "recommendedBytes": verdict.recommended_bytes,
            "freedBytes": verdict.freed_bytes,
            "recommendation": verdict.recommendation,
            "overprovisioned": verdict.overprovisioned,
        }
        return Response(PreviewResultSerializer(result).data)


class ReportView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=report_query_params(), responses=ReportSerializer, tags=["rightsizing"])
    def get(self, request: Request) -> Response:
        """Per model and per pool, filtered and sorted; also the newest refresh of each cluster."""
        visible = restrict(Observation.objects.all(), request.user, VIEW)
        observations = build_report(visible, **report_filters(request.query_params))
        report = {
            "models": [row_for(observation) for observation in observations],
            "pools": pool_totals(observations),
            "refreshes": last_refreshes(visible_cluster_ids(request.user)),
        }
        return Response(ReportSerializer(report).data)


class HistoryView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses=ObservationSerializer(many=True), tags=["rightsizing"])
    def get(self, request: Request, pk: int, kind: str = DEFAULT_SLUG) -> Response:
        """Every observation of one serving object (an InferenceModel under models/), newest first."""
        model = kind_for_slug(kind)
        obj = get_object_or_404(restrict(model.objects.all(), request.user, VIEW), pk=pk)
        history = Observation.objects.filter(kind=model.kube.kind, object_id=obj.pk)
        return Response(ObservationSerializer(history, many=True).data)


class RefreshView(APIView):
    permission_classes = [MayRefresh]

    @extend_schema(request=RefreshRequestSerializer, responses=RefreshSerializer(many=True), tags=["rightsizing"])
    def post(self, request: Request) -> Response:
        """Refresh one cluster (or every cluster with a Prometheus URL) now; failures are in the answer."""
        serializer = RefreshRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        refreshes = refresh_clusters(
            serializer.validated_data.get("cluster"), visible_cluster_ids(request.user, CHANGE)
        )
        return Response(RefreshSerializer(refreshes, many=True).data)


class ApplyView(APIView):
    permission_classes = [CanChangeTheKind]

    @extend_schema(request=None, responses={status.HTTP_200_OK: KubeObjectSerializer}, tags=["rightsizing"])
    def post(self, request: Request, pk: int, kind: str = DEFAULT_SLUG) -> Response:
        """Set the object's pods' memory to the current recommendation (audited, then synced)."""
        model = kind_for_slug(kind)
        obj = get_object_or_404(restrict(model.objects.select_related("cluster"), request.user, CHANGE), pk=pk)
        applied = apply_recommendation(obj, default_policy(), Actor.from_request(request, "api"))
        return Response(manifest_serializer_for(model)(applied).data)
