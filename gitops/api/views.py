"""Staff's endpoint for change modes."""

from __future__ import annotations

from rest_framework import viewsets
from rest_framework.permissions import IsAdminUser

from gitops.api.serializers import ChangeModeSerializer
from gitops.models import ChangeMode


class ChangeModeViewSet(viewsets.ModelViewSet):
    """Where portal edits go, per cluster (``namespace`` empty) or namespace: ``direct`` or ``git``.
    Staff only: a change mode decides where every team's edits are written, with the forge's token."""

    queryset = ChangeMode.objects.select_related("cluster")
    serializer_class = ChangeModeSerializer
    permission_classes = [IsAdminUser]
    ordering_fields = ["id"]
