"""Planning API: the what-if planner and per-pool accounting (the calculator: calculator_views.py)."""

from __future__ import annotations

from functools import partial

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import (
    VIEW,
    is_unrestricted,
    namespace_predicate,
    restrict,
    visible_cluster_ids,
    visible_clusters,
)
from clusters.web.api.exceptions import field_error_detail
from scheduler.accounting import HOLDERS_SHOWN, pool_accounts
from scheduler.api.serializers import PlanRequestSerializer
from scheduler.planner import plan, plan_to_dict
from scheduler.visibility import hidden_proposals, redact_plan, team_accounts


class PlanView(APIView):
    """Computes a plan and stores nothing, so any logged-in user may ask (hence POST without a model permission)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=PlanRequestSerializer, responses={200: OpenApiTypes.OBJECT}, summary="What-if placement")
    def post(self, request: Request) -> Response:
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
        return Response(redact_plan(plan_to_dict(result), data["cluster"].pk, visible, proposed))


class PoolAccountsView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: OpenApiTypes.OBJECT}, summary="Budget accounting per node pool")
    def get(self, request: Request) -> Response:
        return Response(
            [
                {
                    "cluster": a.cluster_name,
                    "pool": a.pool,
                    "budget_bytes": a.budget_bytes,
                    "allocated_bytes": a.allocated_bytes,
                    "reserved_bytes": a.reserved_bytes,
                    "observed_bytes": a.observed_bytes,
                    "free_bytes": a.free_bytes,
                    "rightsizing_savings_bytes": a.rightsizing_savings_bytes,
                    "gpus_used": a.gpus_used,
                    "holders": [
                        {"model": h.label, "memory_bytes": h.memory_bytes, "gpus": h.gpu_count} for h in a.holders
                    ],
                    "holders_total": a.holders_total,
                }
                for a in team_accounts(
                    pool_accounts(
                        restrict=None
                        if is_unrestricted(request.user)
                        else partial(restrict, user=request.user, action=VIEW),
                        per_pool=HOLDERS_SHOWN,
                    ),
                    namespace_predicate(request.user),
                    visible_cluster_ids(request.user),
                )
            ]
        )
