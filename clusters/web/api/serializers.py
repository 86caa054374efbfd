"""Serializers: clusters (credentials write-only) and mirrored objects in Kubernetes manifest shape."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from clusters.change_routes import change_route
from clusters.kube.failures import last_error
from clusters.models import AuditEntry, Cluster, KubeObject
from clusters.sync.audit import Actor
from clusters.sync.merge import apply_merge_patch
from clusters.validation.manifests import identity_errors, validate_manifest
from clusters.validation.schemas import FieldError, ManifestInvalid
from clusters.web.api.exceptions import field_error_detail
from clusters.web.connection_rules import connection_change_errors
from clusters.web.edits import VERSION_PATH
from clusters.web.services import Resolution, assign_manifest, resolve_cluster, save_portal_edit


class ClusterSerializer(serializers.ModelSerializer):
    """A cluster; ``bearer_token`` is accepted but never returned (``has_token`` says whether one is set)."""

    has_token = serializers.SerializerMethodField()

    class Meta:
        model = Cluster
        fields = [
            "id",
            "name",
            "description",
            "auth_method",
            "server_url",
            "kubeconfig_path",
            "kubeconfig_context",
            "bearer_token",
            "has_token",
            "ca_cert",
            "insecure_skip_tls_verify",
            "allow_insecure_http",
            "impersonate_users",
            "namespaces",
            "request_timeout_seconds",
            "managed_kinds",
            "prometheus_url",
            "prometheus_auth_header",
            "healthy",
            "last_error",
            "missing_kinds",
            "last_full_resync_at",
            "created_at",
            "updated_at",
        ]
        extra_kwargs = {"bearer_token": {"write_only": True}, "prometheus_auth_header": {"write_only": True}}

    def get_has_token(self, cluster: Cluster) -> bool:
        return bool(cluster.bearer_token)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        candidate = Cluster(**{**({} if self.instance is None else _model_values(self.instance)), **attrs})
        user = getattr(self.context.get("request"), "user", None)
        newly_insecure = candidate.allow_insecure_http and not (self.instance and self.instance.allow_insecure_http)
        if newly_insecure and not (user and user.is_staff):
            raise serializers.ValidationError({"allow_insecure_http": ["only staff may allow plain http"]})
        if self.instance is not None:
            moved = candidate.moved_credential_errors(self.instance, set(attrs))
            if moved:
                raise serializers.ValidationError({field: [message] for field, message in moved.items()})
        refused = connection_change_errors(user, self.instance, candidate, {k for k, v in attrs.items() if v})
        if refused:
            raise serializers.ValidationError({field: [message] for field, message in refused.items()})
        candidate.clean()
        return attrs


class ResolveSerializer(serializers.Serializer):
    take = serializers.ChoiceField(
        choices=Resolution.CHOICES,
        help_text="'portal' applies the portal's values over the cluster's; "
        "'cluster' drops the portal's edit. To edit, PUT or PATCH the object.",
    )


class AuditEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEntry
        fields = ["id", "at", "action", "source", "actor_label", "changes", "message"]


def _model_values(instance: Cluster) -> dict[str, Any]:
    return {field.name: getattr(instance, field.name) for field in Cluster._meta.concrete_fields if field.name != "id"}


VERSION_REQUIRED = (
    "is required to update: send the metadata.resourceVersion of the copy you edited (as GET returns it), "
    "or PATCH only the fields you change"
)


class EventSerializer(serializers.Serializer):
    type = serializers.CharField(help_text="Normal or Warning.")
    reason = serializers.CharField()
    involved = serializers.CharField(help_text="Kind/name of the object the event is about.")
    message = serializers.CharField()
    count = serializers.IntegerField(help_text="How many times it happened (identical events are counted).")
    last_seen = serializers.CharField()


class ObjectEventsSerializer(serializers.Serializer):
    events = EventSerializer(many=True, help_text="Newest first.")
    error = serializers.CharField(help_text="Why the cluster could not be read; empty when it was.")


# The attribute a list page's rows carry their cluster's name in, read without their Cluster
# (KubeObjectViewSet.page_rows_queryset).
CLUSTER_NAME = "cluster_name"

# What a read adds to the manifest, dropped from a write, so an object read can be written back as
# it is (status belongs to the cluster).
OUTPUT_ONLY = ("id", "sync", "lastError", "summary", "status")


GITOPS_MEMO = "gitops"  # the serializer context's key for the change route's words on a page of objects


class KubeObjectListSerializer(serializers.ListSerializer):
    """A page of objects: the change route describes them all at once (``sync.gitops``), so the
    page's queries do not grow with its objects."""

    def to_representation(self, data: Any) -> list[dict[str, Any]]:
        objs = list(data.all() if hasattr(data, "all") else data)
        route = change_route()
        if route is not None:
            self.context[GITOPS_MEMO] = route.describe_many(objs)
        return super().to_representation(objs)


class KubeObjectSerializer(serializers.Serializer):
    """One mirrored object, in and out in the shape ``kubectl get -o yaml`` prints.

    Input may be such output as is: ``status`` and server-set metadata are ignored (status
    belongs to the cluster, as with a CRD's ``/status`` subresource). ``PATCH`` is a JSON merge
    patch of the manifest. The target cluster comes from ``cluster`` in the body or the
    ``?cluster=`` parameter, defaulting to the only cluster.

    Updates name the copy they were made from in ``metadata.resourceVersion`` (the portal's
    version, as GET shows it; required for PUT, as the Kubernetes API requires it for custom
    resources): an older one is refused with 409 (:mod:`clusters.web.edits`). A PATCH without it is
    applied to the current object, which the view holds locked for the request.
    """

    model: type[KubeObject]

    class Meta:
        list_serializer_class = KubeObjectListSerializer

    id = serializers.IntegerField(read_only=True)
    cluster = serializers.CharField(required=False, help_text="Cluster name; defaults to the only cluster.")
    apiVersion = serializers.CharField(required=False)
    kind = serializers.CharField(required=False)
    metadata = serializers.JSONField(help_text="name (required), namespace (default 'default'), labels, annotations.")
    spec = serializers.JSONField(required=False)
    status = serializers.JSONField(required=False, help_text="Ignored on input: status belongs to the cluster.")
    sync = serializers.SerializerMethodField()
    lastError = serializers.SerializerMethodField(
        help_text="What is wrong now, apart from the sync state: {reason, message, since} of the sync's error, "
        "else of the controller's failing Ready condition as the cluster has it; null when nothing is."
    )
    summary = serializers.SerializerMethodField()

    def get_sync(self, obj: KubeObject) -> dict[str, Any]:
        """Sync state; in Conflict also the cluster's side and each field with base/portal/cluster values;
        ``gitops``: where the object is run from Git, its file, pending pull requests and drift (else null)."""
        route = change_route()
        memo = self.context.get(GITOPS_MEMO)
        if memo is not None and (obj.kube.kind, obj.pk) in memo:
            gitops = memo[(obj.kube.kind, obj.pk)]
        else:
            gitops = route.describe(obj) if route is not None else None
        return {
            "state": obj.sync_state,
            "lastError": obj.last_error,
            "updatedAt": obj.updated_at,
            "resourceVersion": obj.resource_version,
            "conflict": obj.conflict,
            "gitops": gitops,
        }

    def get_lastError(self, obj: KubeObject) -> dict[str, str] | None:
        return last_error(obj)

    def get_summary(self, obj: KubeObject) -> dict[str, Any]:
        """The indexed columns derived from spec/status, as the catalog shows them."""
        return {field: getattr(obj, field) for field in obj.projected_fields()}

    def to_representation(self, obj: KubeObject) -> dict[str, Any]:
        manifest = obj.to_manifest()
        manifest.setdefault("status", {})
        return {
            "id": obj.pk,
            "cluster": getattr(obj, CLUSTER_NAME) if hasattr(obj, CLUSTER_NAME) else obj.cluster.name,
            **manifest,
            "lastError": self.get_lastError(obj),
            "sync": self.get_sync(obj),
            "summary": self.get_summary(obj),
        }

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise serializers.ValidationError({"(root)": ["expected a Kubernetes manifest (a JSON object)"]})
        if self.partial and self.instance is not None:
            data = apply_merge_patch(self.instance.to_manifest(), data)
        return {key: value for key, value in data.items() if key not in OUTPUT_ONLY}

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        manifest = {key: value for key, value in attrs.items() if key != "cluster"}
        try:
            cluster = self._target_cluster(attrs.get("cluster"))
            manifest = validate_manifest(self.model, manifest, cluster)
            errors = identity_errors(self.model, cluster, manifest["metadata"], self.instance)
            if self.instance is not None and not manifest["metadata"].get("resourceVersion"):
                errors.append(FieldError(VERSION_PATH, None, VERSION_REQUIRED))
            if errors:
                raise ManifestInvalid(errors)
        except ManifestInvalid as invalid:
            raise serializers.ValidationError(field_error_detail(invalid.errors)) from None
        return {"cluster": cluster, "manifest": manifest}

    def _target_cluster(self, name: str | None):
        if self.instance is not None:
            if name and name != self.instance.cluster.name:
                raise ManifestInvalid([FieldError("cluster", name, "cannot change; delete and create instead")])
            return self.instance.cluster
        request = self.context.get("request")
        return resolve_cluster(name or (request.query_params.get("cluster") if request else None))

    def _actor(self) -> Actor:
        return Actor.from_request(self.context.get("request"), AuditEntry.Source.API)

    def create(self, validated: dict[str, Any]) -> KubeObject:
        obj = self.model(cluster=validated["cluster"])
        assign_manifest(obj, validated["manifest"])
        return save_portal_edit(obj, self._actor(), made_from=None)

    def update(self, obj: KubeObject, validated: dict[str, Any]) -> KubeObject:
        assign_manifest(obj, validated["manifest"])
        return save_portal_edit(obj, self._actor(), made_from=validated["manifest"]["metadata"]["resourceVersion"])


def manifest_serializer_for(model: type[KubeObject]) -> type[KubeObjectSerializer]:
    """A KubeObjectSerializer bound to one kind (named after it, for the OpenAPI schema)."""
    return type(f"{model.__name__}Serializer", (KubeObjectSerializer,), {"model": model})
