"""``/api/limits/`` (staff set them, a team reads its own) and ``/api/usage/`` (showback rows)."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.public import is_unrestricted
from clusters.web.api.pagination import LimitOffsetPagination
from clusters.web.api.permissions import ReadLoggedInWriteWithModelPermission
from clusters.web.api.views import KubeObjectViewSet
from governance.api.serializers import LimitSerializer, UsagePageSerializer
from governance.models import Limit
from governance.showback import UsageQuery, showback


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
    """Showback rows per team and model (and day with ``group_by=day``): the caller's teams only.

    Paged like every other list (``limit``/``offset``, ``next``/``previous`` links,
    :class:`~clusters.web.api.pagination.LimitOffsetPagination`): staff's month by day is 28,000
    rows, and writing them all as one answer cost about 300 ms of CPU a request. The rows of past
    days are summed once per change of their rollups and kept (:func:`~governance.showback.showback`),
    and only a page of them is written as JSON; ``totals`` carries the whole selection's sums so
    that a client wanting only the sum reads one page. The CSV export (governance.views) stays whole.
    """

    permission_classes = [IsAuthenticated]
    # DRF's JSON bytes written by orjson, as the mirrored kinds' lists are (clusters.web.api.renderers).
    renderer_classes = KubeObjectViewSet.renderer_classes
    pagination_class = LimitOffsetPagination

    @extend_schema(
        parameters=[
            OpenApiParameter("team", str, description="A team name"),
            OpenApiParameter("model", str, description="A model's gateway id"),
            OpenApiParameter("from", str, description="First day (YYYY-MM-DD, UTC), default: this month's first"),
            OpenApiParameter("to", str, description="Last day, inclusive (YYYY-MM-DD), default: today"),
            OpenApiParameter("group_by", str, enum=["day"], description="One row per day too"),
            OpenApiParameter("limit", int, description=(
                f"Rows per page, default {LimitOffsetPagination.default_limit}, "
                f"at most {LimitOffsetPagination.max_limit}")),
            OpenApiParameter("offset", int, description="Rows to skip (follow the next and previous links)"),
        ],
        responses={200: UsagePageSerializer},
        summary="Requests, tokens, GPU-hours and cost per team and model, a page at a time",
    )
    def get(self, request: Request) -> Response:
        query = UsageQuery.from_params(request.query_params, request.user)
        _check_paging(request)
        found = showback(query)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(found.rows, request, view=self)
        response = paginator.get_paginated_response([row.as_dict() for row in page])
        response.data["totals"] = found.totals_dict
        return response


def _check_paging(request: Request) -> None:
    """A 400 naming ``limit`` or ``offset`` when it is no whole number in range: DRF's paging reads
    a bad one as its default, which would answer a page the client did not ask for."""
    most = LimitOffsetPagination.max_limit
    for name, least in (("limit", 1), ("offset", 0)):
        value = request.query_params.get(name)
        if value is None:
            continue
        if not (value.isascii() and value.isdigit()) or int(value) < least:  # '²' is a digit int() refuses
            raise ValidationError({name: [f"{name}: {value[:40]!r} is not a whole number of at least {least}"]})
        if name == "limit" and int(value) > most:
            raise ValidationError({name: [f"{name}: {value[:40]!r} is more than the most rows a page holds, {most}"]})
