"""Clusters and the abstract mirror of a Kubernetes object that every mirrored kind builds on."""

from __future__ import annotations

import hashlib
import json
from typing import Any, ClassVar
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models
from encrypted_fields.fields import EncryptedTextField

from clusters.controller_registry import controllable_kinds
from clusters.json_columns import JSONField
from clusters.kinds import KindInfo
from clusters.url_rules import redact_url, validate_http_url
from clusters.validation.manifests import ManifestInvalid, validate_manifest
from clusters.validation.metadata_rules import DNS1123_LABEL
from clusters.validation.schemas import clip

# ``json.dumps(seen, sort_keys=True, default=str)``, which builds this very encoder on every call (its
# keyword arguments are not the defaults): built once, as an API page asks for 50 versions (0.07 ms).
# Its ``encode`` keeps no state between calls. A version's bytes must never change: clients hold them.
_VERSION_ENCODER = json.JSONEncoder(sort_keys=True, default=str)


class SyncState(models.TextChoices):
    """Where a mirrored row stands relative to the cluster (see DESIGN.md, "Sync")."""

    SYNCED = "Synced", "Synced"
    PENDING_APPLY = "PendingApply", "Pending apply"
    CONFLICT = "Conflict", "Conflict"
    ERROR = "Error", "Error"
    DELETING = "Deleting", "Deleting"
    DELETED_IN_CLUSTER = "DeletedInCluster", "Deleted in cluster"


class Cluster(models.Model):
    """A Kubernetes API endpoint the portal syncs with. Credentials are write-only everywhere.

    They are also encrypted at rest (Fernet, keys from ``SECRET_KEY`` and ``FIELD_ENCRYPTION_KEYS``,
    see docs/security.md, "Secrets at rest"), so a database dump or backup does not reveal them; the library
    stores an empty credential as NULL.
    """

    # Each URL and the credential sent to it: a changed URL needs its credential given again.
    CREDENTIAL_FOR_URL: ClassVar[dict[str, str]] = {
        "server_url": "bearer_token",
        "prometheus_url": "prometheus_auth_header",
    }

    class AuthMethod(models.TextChoices):
        KUBECONFIG = "kubeconfig", "Kubeconfig file and context"
        TOKEN = "token", "Server URL and bearer token"
        IN_CLUSTER = "in_cluster", "In-cluster service account"
        SNAPSHOT = "snapshot", "Snapshot only (no API server; demo data)"

    name = models.SlugField(max_length=63, unique=True, help_text="Short name used in the portal and API.")
    description = models.CharField(max_length=255, blank=True)
    auth_method = models.CharField(max_length=16, choices=AuthMethod.choices, default=AuthMethod.TOKEN)
    server_url = models.CharField(
        max_length=2048,
        blank=True,
        validators=[validate_http_url],
        help_text="API server URL, e.g. https://10.0.0.1:6443.",
    )
    kubeconfig_path = models.CharField(max_length=1024, blank=True)
    kubeconfig_context = models.CharField(max_length=253, blank=True)
    bearer_token = EncryptedTextField(
        blank=True, null=True, help_text="Never shown back once saved; encrypted at rest."
    )
    ca_cert = models.TextField(blank=True, help_text="PEM-encoded CA bundle of the API server.")
    insecure_skip_tls_verify = models.BooleanField(default=False)
    namespaces = JSONField(default=list, blank=True, help_text="Namespaces to sync; empty means all namespaces.")
    request_timeout_seconds = models.PositiveIntegerField(default=10)
    managed_kinds = JSONField(
        default=list,
        blank=True,
        help_text="Kinds the portal acts as the controller for in this cluster (e.g. InferenceModel, InferenceRun); "
        "the others are only mirrored, as another controller acts on them. Never both.",
    )
    prometheus_auth_header = EncryptedTextField(
        blank=True,
        null=True,
        help_text="Authorization header for Prometheus, e.g. 'Bearer ...'; never shown; encrypted at rest.",
    )
    prometheus_url = models.CharField(
        max_length=2048,
        blank=True,
        validators=[validate_http_url],
        help_text="Prometheus base URL for right-sizing metrics.",
    )
    allow_insecure_http = models.BooleanField(
        default=False,
        help_text="Staff only: let the API server URL (and a Prometheus URL with an auth header) be plain "
        "http://, sending credentials unencrypted. Off: https:// is required.",
    )
    impersonate_users = models.BooleanField(
        default=False,
        help_text="Staff only: send people's writes as them (Impersonate-User: their user name, Impersonate-Group: "
        "their teams), so the cluster's RBAC decides too; the portal's credential then needs the impersonate verb.",
    )
    healthy = models.BooleanField(null=True, editable=False)
    last_error = models.TextField(blank=True, editable=False)
    missing_kinds = JSONField(
        default=list,
        blank=True,
        editable=False,
        help_text="Mirrored kinds whose CRD the cluster does not serve (its operator is not installed); "
        "every resync checks again.",
    )
    last_full_resync_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        required = {
            self.AuthMethod.KUBECONFIG: ["kubeconfig_path"],
            self.AuthMethod.TOKEN: ["server_url"],
        }.get(self.auth_method, [])
        missing = {
            field: f"is required when auth_method is {self.auth_method}"
            for field in required
            if not getattr(self, field)
        }
        if missing:
            raise ValidationError(missing)
        insecure = self.insecure_url_errors()
        if insecure:
            raise ValidationError(insecure)
        if not isinstance(self.namespaces, list) or not all(
            isinstance(ns, str) and len(ns) <= 63 and DNS1123_LABEL.fullmatch(ns) for ns in self.namespaces
        ):
            raise ValidationError(
                {"namespaces": f"{clip(repr(self.namespaces))} must be a list of namespace names (RFC 1123 labels)"}
            )
        allowed = controllable_kinds()
        if not isinstance(self.managed_kinds, list) or any(kind not in allowed for kind in self.managed_kinds):
            raise ValidationError(
                {
                    "managed_kinds": f"{self.managed_kinds!r} must list only kinds the portal can "
                    f"control: {', '.join(allowed)}"
                }
            )

    def insecure_url_errors(self) -> dict[str, str]:
        """URLs that would carry credentials over plain http without staff's explicit consent.

        The API server always gets the bearer token (or serves the objects the portal trusts);
        Prometheus only matters once it gets an auth header. Checked on save and again where the
        credentials are sent (the gateway, the right-sizing refresh), for rows stored before the rule.
        """
        if self.allow_insecure_http:
            return {}
        sends_credentials = {"server_url": True, "prometheus_url": bool(self.prometheus_auth_header)}
        return {
            field: f"{redact_url(getattr(self, field))!r} must be https://, as credentials are sent to it "
            "(staff may set allow_insecure_http to allow plain http)"
            for field, sends in sends_credentials.items()
            if sends and urlsplit(getattr(self, field)).scheme == "http"
        }

    def moved_credential_errors(self, stored: Cluster, supplied: set[str]) -> dict[str, str]:
        """A URL changed while its stored credential was kept (not in ``supplied``): refused.

        Otherwise whoever may edit a cluster could point it at their own listener and be handed the
        credential; giving it again shows the editor knows it already.
        """
        return {
            credential: f"must be given again when {url} changes (the stored one is never sent to a new address)"
            for url, credential in self.CREDENTIAL_FOR_URL.items()
            if getattr(stored, credential)
            and getattr(self, url) != getattr(stored, url)
            and credential not in supplied
        }

    def manages(self, kind: str) -> bool:
        """True when the portal acts as the controller for ``kind`` here (mode `manage`, not `mirror`)."""
        return kind in (self.managed_kinds or [])


class KubeObject(models.Model):
    """Abstract mirror of one namespaced custom resource.

    ``spec`` holds what the portal wants; ``last_synced_spec`` what the cluster had when both
    last agreed, the base of three-way merges. Concrete kinds declare ``kube`` (their identity)
    and ``project()`` (the indexed columns derived from spec/status, never edited by hand).
    """

    kube: ClassVar[KindInfo]
    # Annotations that are a process's bookkeeping, not anyone's decision (the gateway's
    # last-request stamp): their changes alone add no audit entry, and they are left out of the
    # entries other changes make (clusters.sync.audit.decided_changes). The audit log says who
    # decided what; a stamp every few seconds per model drowned it.
    bookkeeping_annotations: ClassVar[frozenset[str]] = frozenset()
    # Maps of the manifest (dotted paths) that end up in a pod made from the object, by the portal's
    # controller or another: as its labels or nodeSelector (label keys and values), as its
    # annotations, or (lists) as its tolerations. Every write path checks them by the API server's rules
    # (``clusters.validation.metadata_rules.pod_metadata_errors``), so what the portal accepts
    # never fails later at the Deployment or Pod.
    pod_label_maps: ClassVar[tuple[str, ...]] = ()
    pod_annotation_maps: ClassVar[tuple[str, ...]] = ()
    pod_toleration_lists: ClassVar[tuple[str, ...]] = ()
    # Status keys the portal itself computes for the kind (right-sizing's figures), which the portal
    # keeps in its copy even where it does not write them to the cluster (a mirrored kind): a
    # status taken from the cluster keeps them where the cluster's status has no such key
    # (``take_cluster_status``), so a wake, an edit or an apply does not blank them. Each key names
    # the column ``project()`` derives from it, if any (kept with it by the bulk sync).
    portal_status_keys: ClassVar[dict[str, str | None]] = {}

    # No index of its own: the unique (cluster, namespace, name) index leads with it and serves every
    # lookup by cluster. A second one only cost writes, and for a cluster newer than the table's
    # statistics the planner took it to find objects by name, walking the cluster's rows once per
    # object (a first resync of 10,000 objects beside 100,000 others: 0.7 s per page of 500).
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+", db_index=False)
    namespace = models.CharField(max_length=63, default="default")
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True, editable=False)
    resource_version = models.CharField(max_length=64, blank=True, editable=False)
    generation = models.BigIntegerField(null=True, blank=True, editable=False)
    observed_generation = models.BigIntegerField(null=True, blank=True, editable=False)
    labels = JSONField(default=dict, blank=True)
    annotations = JSONField(default=dict, blank=True)
    spec = JSONField(default=dict, blank=True)
    status = JSONField(default=dict, blank=True, editable=False)
    last_synced_spec = JSONField(null=True, blank=True, editable=False)
    last_synced_metadata = JSONField(
        null=True, blank=True, editable=False, help_text="Labels and annotations at the last agreement."
    )
    conflict = JSONField(
        null=True,
        blank=True,
        editable=False,
        help_text="While in Conflict: the cluster's side (resourceVersion, spec, labels, annotations) and the fields.",
    )
    sync_state = models.CharField(
        max_length=20, choices=SyncState.choices, default=SyncState.PENDING_APPLY, db_index=True, editable=False
    )
    last_error = models.TextField(blank=True, editable=False)
    cluster_created_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["cluster__name", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="%(app_label)s_%(class)s_unique_per_cluster"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.project()
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = {*kwargs["update_fields"], *self.projected_fields(), "updated_at"}
        super().save(*args, **kwargs)

    @classmethod
    def permission(cls, action: str) -> str:
        """The Django permission to ``action`` (add, change, delete, view) objects of this kind."""
        return f"{cls._meta.app_label}.{action}_{cls._meta.model_name}"

    @classmethod
    def extra_rules(cls, manifest: dict[str, Any]) -> list:
        """Rules the CRD schema cannot express; concrete kinds override. Returns FieldErrors."""
        return []

    @classmethod
    def cluster_rules(cls, cluster: Cluster, manifest: dict[str, Any]) -> list:
        """Rules that depend on the cluster's other objects and staff's settings; FieldErrors."""
        return []

    @classmethod
    def referenced_namespaces(cls, manifest: dict[str, Any]) -> dict[str, str]:
        """Other namespaces the object makes the cluster read from, by field path (access checks)."""
        return {}

    def take_cluster_status(self, status: dict[str, Any] | None) -> None:
        """The cluster's status becomes this row's, merged rather than replaced: the keys of
        ``portal_status_keys`` the cluster's status lacks keep the row's values (the cluster's own
        value wins where it has one). Every path that stores a status read from the cluster (the
        watch, a resync, the controller's status writes, an edit's or apply's answer) goes through here."""
        merged = dict(status or {})
        for key in self.portal_status_keys:
            if key not in merged and key in (self.status or {}):
                merged[key] = self.status[key]
        self.status = merged

    def project(self) -> None:
        """Set the indexed columns derived from spec and status; concrete kinds override."""

    @classmethod
    def projected_fields(cls) -> list[str]:
        """Names of the columns ``project()`` derives; they are read-only in forms and the API."""
        return []

    def clean(self) -> None:
        try:
            validated = validate_manifest(type(self), self.to_manifest(), self.cluster if self.cluster_id else None)
        except ManifestInvalid as invalid:
            raise ValidationError(errors_by_model_field(invalid.errors)) from None
        self.spec = validated["spec"]

    def desired_document(self) -> dict[str, Any]:
        """What the portal wants, in the shape the three-way merge and the audit diff work on."""
        return {"spec": self.spec or {}, "labels": self.labels or {}, "annotations": self.annotations or {}}

    def base_document(self) -> dict[str, Any] | None:
        """What portal and cluster last agreed on; None when they never did."""
        if self.last_synced_spec is None:
            return None
        metadata = self.last_synced_metadata or {}
        return {
            "spec": self.last_synced_spec,
            "labels": metadata.get("labels") or {},
            "annotations": metadata.get("annotations") or {},
        }

    def set_base(self, document: dict[str, Any]) -> None:
        """Record ``document`` (desired_document shape) as the state both sides agree on."""
        self.last_synced_spec = document["spec"]
        self.last_synced_metadata = {"labels": document["labels"], "annotations": document["annotations"]}

    def set_desired(self, document: dict[str, Any]) -> None:
        self.spec, self.labels, self.annotations = document["spec"], document["labels"], document["annotations"]

    def edit_version(self) -> str:
        """The portal's version of this row: what an edit must name as the copy it was made from.

        It is a digest of everything an edit could revert (spec, labels, annotations), of an open
        conflict and of whether the object is gone, so it changes whenever any of them changes,
        from either side. The cluster's resourceVersion is no such version: a row whose edit is
        not applied yet keeps it while its spec changes, and it changes on every status update,
        which no edit touches. Equal content gives an equal version: saving a copy whose version
        still matches cannot undo anything that happened since the copy was made.
        """
        seen = {
            **self.desired_document(),
            "conflict": self.conflict,
            "gone": self.sync_state in (SyncState.DELETING, SyncState.DELETED_IN_CLUSTER),
        }
        return hashlib.sha256(_VERSION_ENCODER.encode(seen).encode()).hexdigest()[:20]

    def to_manifest(self) -> dict[str, Any]:
        """The object in Kubernetes shape, as ``kubectl get -o yaml`` would show it.

        ``metadata.resourceVersion`` is the portal's :meth:`edit_version` (opaque, as in Kubernetes):
        send it back with an edit. The cluster's own resourceVersion is ``resource_version``.
        """
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        for key, value in (
            ("uid", self.uid),
            ("resourceVersion", self.edit_version()),
            ("generation", self.generation),
            ("creationTimestamp", self.cluster_created_at and self.cluster_created_at.strftime("%Y-%m-%dT%H:%M:%SZ")),
            ("labels", self.labels),
            ("annotations", self.annotations),
        ):
            if value:
                metadata[key] = value
        manifest = {
            "apiVersion": self.kube.api_version,
            "kind": self.kube.kind,
            "metadata": metadata,
            "spec": self.spec,
        }
        if self.status:
            manifest["status"] = self.status
        return manifest


def cluster_document(manifest: dict[str, Any]) -> dict[str, Any]:
    """A manifest's mergeable parts (a cluster object's, or an edit's), in KubeObject.desired_document's shape."""
    metadata = manifest.get("metadata") or {}
    return {
        "spec": manifest.get("spec") or {},
        "labels": metadata.get("labels") or {},
        "annotations": metadata.get("annotations") or {},
    }


class AuditEntry(models.Model):
    """One change to a mirrored object: who, from where, and the field-by-field diff."""

    class Source(models.TextChoices):
        PORTAL = "portal", "Portal pages"
        API = "api", "REST API"
        ADMIN = "admin", "Admin"
        CLUSTER = "cluster", "Cluster"
        SYNC = "sync", "Sync engine"

    class Action(models.TextChoices):
        CREATED = "created", "Created"
        UPDATED = "updated", "Updated"
        DELETE_REQUESTED = "delete_requested", "Delete requested"
        DELETED = "deleted", "Deleted"
        APPLIED = "applied", "Applied to cluster"
        MERGED = "merged", "Merged with cluster changes"
        CONFLICT = "conflict", "Conflict"
        RESOLVED = "resolved", "Conflict resolved"
        ERROR = "error", "Error"

    kind = models.CharField(max_length=64)
    object_id = models.BigIntegerField()
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="audit_entries")
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    action = models.CharField(max_length=20, choices=Action.choices)
    source = models.CharField(max_length=10, choices=Source.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    actor_label = models.CharField(max_length=255, help_text="User, 'user (token)', or 'cluster: <field manager>'.")
    changes = JSONField(default=list, blank=True, help_text="[{path, old, new}]")
    message = models.TextField(blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]
        # (at, id): the log's order, read backwards, and a deep page's ids stepped over in it alone
        # (clusters.web.api.pagination.BoundedPaginator); it serves ``at`` ranges (since, until) too
        indexes = [models.Index(fields=["kind", "object_id"]), models.Index(fields=["at", "id"], name="audit_in_order")]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return (
            f"{self.at:%Y-%m-%d %H:%M:%S} {self.kind} {self.namespace}/{self.name} {self.action} by {self.actor_label}"
        )


_MODEL_FIELD_BY_PATH = {
    "metadata.name": "name",
    "metadata.namespace": "namespace",
    "metadata.labels": "labels",
    "metadata.annotations": "annotations",
    "spec": "spec",
    "status": "status",
}


def model_field_for(path: str) -> str:
    """The model field a manifest path belongs to (``spec.memory`` -> ``spec``)."""
    for prefix, field in _MODEL_FIELD_BY_PATH.items():
        if path == prefix or path.startswith((prefix + ".", prefix + "[")):
            return field
    return NON_FIELD_ERRORS


def errors_by_model_field(errors: list) -> dict[str, list[str]]:
    """Group FieldErrors under the model field they belong to, for forms and the admin."""
    grouped: dict[str, list[str]] = {}
    for error in errors:
        grouped.setdefault(model_field_for(error.path), []).append(error.message)
    return grouped


class SyncStat(models.Model):
    """One figure of the sync's health per cluster and kind, kept in the database because the
    processes that see it happen (the watcher, Celery workers) are not the one that serves
    ``/metrics``: the web process reads them at scrape time (``clusters.sync.metrics``), so every web
    worker answers the same. Written through ``clusters.sync.stats`` only."""

    class Counter(models.TextChoices):
        LAST_LIST = "last_list", "Last successful list (Unix time)"
        WATCH_RECONNECTS = "watch_reconnects", "Watches re-opened after an error"
        RELISTS_AFTER_GONE = "relists_after_gone", "Relists after 410 Gone"
        APPLY_ERRORS = "apply_errors", "Failed applies, by HTTP code"
        RECONCILES = "reconciles", "Reconciles run"
        RECONCILE_SECONDS = "reconcile_seconds", "Seconds spent reconciling"
        LEASE_WAITING = "lease_waiting", "1 while this installation's watcher waits for the cluster's Lease"
        LEASE_REFUSED = "lease_refused", "1 while the cluster refuses this installation's watcher its Lease"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=63)
    counter = models.CharField(max_length=32, choices=Counter.choices)
    label = models.CharField(max_length=32, blank=True, help_text="The HTTP code of apply errors; empty otherwise.")
    value = models.FloatField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "kind", "counter", "label"], name="one_sync_stat_per_key")
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id} {self.kind} {self.counter}{f' {self.label}' if self.label else ''} = {self.value}"
