"""API views shared by every mirrored kind, the cluster endpoint and ``/api/apply/``."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from clusters.api.permissions import StaffOnly
from clusters.api.serializers import AuditEntrySerializer, ClusterSerializer, ResolveSerializer
from clusters.audit import Actor
from clusters.filtersets import ClusterFilterSet
from clusters.models import AuditEntry, Cluster
from clusters.services import request_delete, resolve_conflict

CLUSTER_PARAMETER = OpenApiParameter(
    "cluster", str, description="Target cluster name for create; defaults to the only cluster."
)


class KubeObjectViewSet(viewsets.ModelViewSet):
    """CRUD for one mirrored kind; subclasses only name queryset, serializer and filterset."""

    base_ordering_fields = ["name", "namespace", "cluster__name", "sync_state", "updated_at", "created_at"]

    @property
    def ordering_fields(self) -> list[str]:
        return [*self.base_ordering_fields, *self.queryset.model.projected_fields()]

    @extend_schema(parameters=[CLUSTER_PARAMETER])
    def create(self, request, *args, **kwargs):
        return super().create(request, *args, **kwargs)

    @extend_schema(request=ResolveSerializer)
    @action(detail=True, methods=["post"])
    def resolve(self, request, pk=None):
        """Settle a Conflict by taking the portal's or the cluster's values (needs change permission)."""
        obj = self.get_object()
        choice = ResolveSerializer(data=request.data)
        choice.is_valid(raise_exception=True)
        resolved = resolve_conflict(
            obj, choice.validated_data["take"], Actor.from_request(request, AuditEntry.Source.API)
        )
        return Response(self.get_serializer(resolved).data)

    @extend_schema(responses={200: AuditEntrySerializer(many=True)})
    @action(detail=True, methods=["get"])
    def audit(self, request, pk=None):
        """Every recorded change of this object, newest first."""
        obj = self.get_object()
        entries = AuditEntry.objects.filter(kind=obj.kube.kind, object_id=obj.pk).select_related("actor")
        page = self.paginate_queryset(entries)
        return self.get_paginated_response(AuditEntrySerializer(page, many=True).data)

    def destroy(self, request, *args, **kwargs):
        """Objects the cluster has are marked ``Deleting`` (202) until the cluster lets them go."""
        gone = request_delete(self.get_object(), Actor.from_request(request, AuditEntry.Source.API))
        return Response(status=status.HTTP_204_NO_CONTENT if gone else status.HTTP_202_ACCEPTED)


class ClusterViewSet(viewsets.ModelViewSet):
    """Clusters the portal syncs with (staff only; tokens are write-only)."""

    queryset = Cluster.objects.all()
    serializer_class = ClusterSerializer
    permission_classes = [StaffOnly]
    filterset_class = ClusterFilterSet
    ordering_fields = ["name", "created_at"]
