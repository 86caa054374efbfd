"""API views shared by every mirrored kind, the cluster endpoint and ``/api/apply/``."""

from __future__ import annotations

from dataclasses import asdict

from django.db import transaction
from django.db.models import F
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import renderers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.settings import api_settings

from accounts.public import ACTION_BY_METHOD, ADD, can_act_in, restrict, unreadable_references
from clusters.kube.live import live_objects
from clusters.models import AuditEntry, Cluster
from clusters.sync.audit import Actor
from clusters.validation.schemas import ManifestInvalid
from clusters.web.api.permissions import ChangeModelPermission, ModelPermissionsIncludingView
from clusters.web.api.renderers import JSONRenderer
from clusters.web.api.serializers import (
    CLUSTER_NAME,
    AuditEntrySerializer,
    ClusterSerializer,
    ObjectEventsSerializer,
    ResolveSerializer,
)
from clusters.web.filtersets import ClusterFilterSet
from clusters.web.services import request_delete, resolve_cluster, resolve_conflict

CLUSTER_PARAMETER = OpenApiParameter(
    "cluster", str, description="Target cluster name for create; defaults to the only cluster."
)


class KubeObjectViewSet(viewsets.ModelViewSet):
    """CRUD for one mirrored kind; subclasses only name queryset, serializer and filterset."""

    base_ordering_fields = ["name", "namespace", "cluster__name", "sync_state", "updated_at", "created_at"]
    # DRF's JSON renderer's bytes, written by orjson (clusters.web.api.renderers says why only here).
    renderer_classes = [
        JSONRenderer if renderer is renderers.JSONRenderer else renderer
        for renderer in api_settings.DEFAULT_RENDERER_CLASSES
    ]

    @property
    def ordering_fields(self) -> list[str]:
        return [*self.base_ordering_fields, *self.queryset.model.projected_fields()]

    def get_queryset(self):
        """Only the user's teams' namespaces; writes (by HTTP method) only where their teams may edit."""
        queryset = restrict(
            super().get_queryset(), self.request.user, ACTION_BY_METHOD.get(self.request.method, "change")
        )
        if self.action in ("update", "partial_update"):
            # An update (a merge patch above all) is computed from the row it reads: lock that row
            # until the edit is saved, so concurrent edits apply one after the other, none lost.
            queryset = queryset.select_for_update(of=("self",))
        return queryset

    def page_rows_queryset(self, queryset):
        """A list page's rows (clusters.web.api.pagination): each with its cluster's name, the one
        column of it a list shows, joined, rather than a Cluster built for every row (its JSON
        columns decoded, its credentials decrypted, 26 us each), 50 times a page for the same few
        clusters. The serializer reads the name from the row; the ids and counts join nothing."""
        return queryset.select_related(None).annotate(**{CLUSTER_NAME: F("cluster__name")})

    def update(self, request, *args, **kwargs):
        """PUT or PATCH in one transaction holding the row's lock (see ``get_queryset``)."""
        with transaction.atomic():
            return super().update(request, *args, **kwargs)

    def perform_create(self, serializer) -> None:
        """The validated (defaulted) namespace is checked again: it is the one actually written."""
        cluster, namespace = serializer.validated_data["cluster"], serializer.validated_data["manifest"]["metadata"]
        if not can_act_in(self.request.user, cluster.pk, namespace["namespace"], ADD):
            raise PermissionDenied(
                f"metadata.namespace: {namespace['namespace']!r} in cluster {cluster.name} "
                "is not a namespace your teams may create in"
            )
        self._refuse_unreadable_references(serializer)
        serializer.save()

    def perform_update(self, serializer) -> None:
        self._refuse_unreadable_references(serializer)
        serializer.save()

    def _refuse_unreadable_references(self, serializer) -> None:
        data = serializer.validated_data
        refused = unreadable_references(self.request.user, data["cluster"].pk, serializer.model, data["manifest"])
        if refused:
            raise PermissionDenied(refused)

    @extend_schema(parameters=[CLUSTER_PARAMETER])
    def create(self, request, *args, **kwargs):
        _refuse_foreign_namespace(request)  # before validation, whose "already exists" would leak names
        return super().create(request, *args, **kwargs)

    @extend_schema(request=ResolveSerializer)
    @action(detail=True, methods=["post"], permission_classes=[ChangeModelPermission])
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

    @extend_schema(responses=ObjectEventsSerializer)
    @action(detail=True, methods=["get"])
    def events(self, request, pk=None):
        """The recent Kubernetes Events of this object and of what it owns, as the cluster has them
        now (newest first); ``error`` says why the cluster could not be read."""
        live = live_objects(self.get_object())
        return Response({"events": [asdict(event) for event in live.events], "error": live.error})

    def destroy(self, request, *args, **kwargs):
        """Objects the cluster has are marked ``Deleting`` (202) until the cluster lets them go."""
        gone = request_delete(self.get_object(), Actor.from_request(request, AuditEntry.Source.API))
        return Response(status=status.HTTP_204_NO_CONTENT if gone else status.HTTP_202_ACCEPTED)


def _refuse_foreign_namespace(request) -> None:
    """403 for a create aimed at a namespace the user's teams may not create in, as far as the raw body says."""
    data = request.data if isinstance(request.data, dict) else {}
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    namespace = metadata.get("namespace") or "default"
    name = data.get("cluster") or request.query_params.get("cluster")
    try:
        cluster = resolve_cluster(name)
    except ManifestInvalid:
        return  # validation names the problem
    if isinstance(namespace, str) and not can_act_in(request.user, cluster.pk, namespace, ADD):
        raise PermissionDenied(
            f"metadata.namespace: {namespace!r} in cluster {cluster.name} is not a namespace your teams may create in"
        )


class ClusterViewSet(viewsets.ModelViewSet):
    """Clusters the portal syncs with (``clusters.*_cluster`` permissions; credentials are write-only)."""

    queryset = Cluster.objects.all()
    serializer_class = ClusterSerializer
    permission_classes = [ModelPermissionsIncludingView]
    filterset_class = ClusterFilterSet
    ordering_fields = ["name", "created_at"]
