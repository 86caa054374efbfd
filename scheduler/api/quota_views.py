"""Team quotas API: staff list, set, change and remove a team's share of a node pool."""

from __future__ import annotations

from rest_framework import viewsets
from rest_framework.permissions import IsAdminUser

from scheduler.api.quota_serializers import TeamQuotaSerializer
from scheduler.models import TeamQuota


class TeamQuotaViewSet(viewsets.ModelViewSet):
    """Staff only: a quota shapes what every team may run, so no team sets its own."""

    permission_classes = [IsAdminUser]
    serializer_class = TeamQuotaSerializer
    queryset = TeamQuota.objects.select_related("team", "pool__cluster").order_by("pool__cluster__name", "pool__name",
                                                                                  "team__name")  # fmt: skip
