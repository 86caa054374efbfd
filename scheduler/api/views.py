"""Planning API: the what-if planner and per-pool accounting (the calculator: calculator_views.py)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.public import (
    namespace_predicate,
    visible_clusters,
)
from clusters.validation.schemas import ManifestInvalid
from clusters.web.api.exceptions import field_error_detail
from scheduler.api.serializers import PlanRequestSerializer, PoolAccountSerializer
from scheduler.planning.pages import DEFAULT_LIMIT, MAX_LIMIT, PlanChanged, first_page, next_page, parse_limit
from scheduler.planning.planner import plan, plan_to_dict
from scheduler.planning.visibility import hidden_proposals, redact_plan, visible_pool_accounts


class PlanView(APIView):
    """Computes a plan and stores nothing, so any logged-in user may ask (hence POST without a model permission)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        request=PlanRequestSerializer,
        parameters=[
            OpenApiParameter(
                "limit", int, description=f"Entries of each long list per answer, 1 to {MAX_LIMIT} "
                f"(default {DEFAULT_LIMIT}): models per node, misses, over-committed, idle, right-sizing.",
            ),
            OpenApiParameter(
                "cursor", str, description="A cursor from the answer's ``pages`` (or a page's ``cursor``): "
                "the same request body answers that list's next entries. 409 when the plan changed meanwhile.",
            ),
        ],
        responses={200: OpenApiTypes.OBJECT, 409: OpenApiTypes.OBJECT},
        summary="What-if placement (long lists paged)",
    )  # fmt: skip
    def post(self, request: Request) -> Response:
        try:
            limit = parse_limit(request.query_params.get("limit"))
        except ManifestInvalid as invalid:
            raise ValidationError(field_error_detail(invalid.errors)) from None
        context = {"visible": namespace_predicate(request.user), "clusters": visible_clusters(request.user)}
        serializer = PlanRequestSerializer(data=request.data, context=context)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        visible = namespace_predicate(request.user)
        hidden = hidden_proposals(data["proposals"], data["models"], data["cluster"].name, visible)
        if hidden:
            raise ValidationError(field_error_detail(hidden))
        result = plan(
            data["cluster"], data["proposals"], data["include_running"], data.get("now"), repack=data["repack"]
        )
        proposed = {proposal.label for proposal in data["proposals"]}
        shown = redact_plan(plan_to_dict(result), data["cluster"].pk, visible, proposed)
        cursor = request.query_params.get("cursor")
        if not cursor:
            return Response(first_page(shown, limit))
        try:
            return Response(next_page(shown, cursor, limit))
        except ManifestInvalid as invalid:
            raise ValidationError(field_error_detail(invalid.errors)) from None
        except PlanChanged as changed:
            message = f"cursor: list {changed} changed since the cursor was given (the cluster changed); start again"
            return Response({"cursor": [message]}, status=status.HTTP_409_CONFLICT)


class PoolAccountsView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: PoolAccountSerializer(many=True)}, summary="Budget accounting per node pool")
    def get(self, request: Request) -> Response:
        return Response(PoolAccountSerializer(visible_pool_accounts(request.user), many=True).data)
