"""``/api/limits/`` (staff set them, a team reads its own) and ``/api/usage/`` (showback rows)."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.public import is_unrestricted
from clusters.web.api.permissions import ReadLoggedInWriteWithModelPermission
from clusters.web.api.views import KubeObjectViewSet
from governance.api.serializers import LimitSerializer, UsageRowSerializer
from governance.models import Limit
from governance.showback import UsageQuery, usage_rows


class StaffWrites(ReadLoggedInWriteWithModelPermission):
    """Anyone logged in reads (their teams' limits only); staff with the model permission write."""

    def has_permission(self, request, view) -> bool:
        allowed = super().has_permission(request, view)
        return allowed and (request.method in ("GET", "HEAD", "OPTIONS") or is_unrestricted(request.user))


class LimitViewSet(viewsets.ModelViewSet):
    """Limits per team, per model, per team and model. POST for a scope that has one updates it."""

    queryset = Limit.objects.none()  # for the schema; get_queryset() answers requests
    serializer_class = LimitSerializer
    permission_classes = [StaffWrites]
    filterset_fields = ["model"]
    ordering = ["id"]

    def get_queryset(self) -> QuerySet[Limit]:
        rows = Limit.objects.select_related("team").order_by("id")
        if is_unrestricted(self.request.user):
            return rows
        return rows.filter(team__members=self.request.user)

    @extend_schema(responses={201: LimitSerializer, 200: LimitSerializer},
                   description="Sets a scope's limit: 201 for a new scope, 200 for one that had a limit (updated).")
    def create(self, request: Request, *args, **kwargs) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        existing = Limit.objects.filter(team=data.get("team"), model=data.get("model", "")).first()
        if existing is None:
            serializer.save()
            return Response(serializer.data, status=status.HTTP_201_CREATED)
        updated = self.get_serializer(existing, data=request.data)
        updated.is_valid(raise_exception=True)
        updated.save()
        return Response(updated.data, status=status.HTTP_200_OK)


class UsageView(APIView):
    """Showback rows per team and model (and day with ``group_by=day``): the caller's teams only."""

    permission_classes = [IsAuthenticated]
    # DRF's JSON bytes written by orjson, as the mirrored kinds' lists are (clusters.web.api.renderers):
    # staff's month by day is 28,000 rows, and its rows hold no NaN or infinity (sums and prices).
    renderer_classes = KubeObjectViewSet.renderer_classes

    @extend_schema(
        parameters=[
            OpenApiParameter("team", str, description="A team name"),
            OpenApiParameter("model", str, description="A model's gateway id"),
            OpenApiParameter("from", str, description="First day (YYYY-MM-DD, UTC), default: this month's first"),
            OpenApiParameter("to", str, description="Last day, inclusive (YYYY-MM-DD), default: today"),
            OpenApiParameter("group_by", str, enum=["day"], description="One row per day too"),
        ],
        responses={200: UsageRowSerializer(many=True)},
        summary="Requests, tokens, GPU-hours and cost per team and model",
    )
    def get(self, request: Request) -> Response:
        query = UsageQuery.from_params(request.query_params, request.user)
        return Response([row.as_dict() for row in usage_rows(query)])
