"""Right-sizing history: every refresh of a cluster and every observation of a model."""

from __future__ import annotations

from typing import Any

from django.db import models

from clusters.models import Cluster


class Refresh(models.Model):
    """One refresh of one cluster's metrics. A failed refresh leaves the last report in place."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="rightsizing_refreshes")
    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    window_seconds = models.PositiveIntegerField()
    ok = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    queries = models.PositiveIntegerField(default=0, help_text="HTTP requests made to Prometheus.")
    models_seen = models.PositiveIntegerField(default=0)
    models_with_data = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-started_at", "-id"]
        verbose_name_plural = "refreshes"
        get_latest_by = "started_at"

    def __str__(self) -> str:
        return f"{self.cluster} {self.started_at:%Y-%m-%d %H:%M} {'ok' if self.ok else 'failed'}"


class Observation(models.Model):
    """What one refresh saw for one serving object (any kind), and what the policy made of it.

    The object is named by ``kind`` and ``object_id`` (plus a copy of cluster, namespace and name,
    so the report filters, sorts and pages in SQL without joining three kinds' tables), whatever
    app declares the kind: right-sizing finds kinds through the registry and imports none. Removing
    the object in the portal deletes its history (scheduler/rightsizing/kinds.py), deleting its
    cluster too (``cluster``).

    ``peak_bytes`` is None when there was not enough data (fewer samples than the policy's
    minimum): then there is no utilization and no recommendation, never a made-up number.
    ``ratio`` is the true peak/declared (above 1 when the model outgrew its declaration);
    ``utilization_percent`` is the clamped 0..100 value written to status. ``freed_bytes`` is THE
    saving (declared minus recommended memory; negative asks for more), the one number every page
    shows (see scheduler/savings.py).
    """

    refresh = models.ForeignKey(Refresh, on_delete=models.CASCADE, related_name="observations")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+", null=True)
    kind = models.CharField(max_length=64, default="InferenceModel")
    object_id = models.BigIntegerField(null=True)
    namespace = models.CharField(max_length=63, blank=True)
    name = models.CharField(max_length=253, blank=True)
    model_name = models.TextField(blank=True)  # a copy of the object's served model name
    observed_at = models.DateTimeField(db_index=True)
    is_latest = models.BooleanField(default=True, db_index=True)
    node_pool = models.TextField(blank=True)  # a copy of the object's node_pool
    samples = models.PositiveIntegerField(default=0)
    declared_bytes = models.BigIntegerField(null=True, blank=True)
    peak_bytes = models.BigIntegerField(null=True, blank=True)
    ratio = models.FloatField(null=True, blank=True)
    utilization_percent = models.PositiveSmallIntegerField(null=True, blank=True)
    recommended_bytes = models.BigIntegerField(null=True, blank=True)
    freed_bytes = models.BigIntegerField(null=True, blank=True)
    recommendation = models.TextField(blank=True)
    overprovisioned = models.BooleanField(default=False)
    oom_killed = models.BooleanField(default=False, help_text="A container was OOM-killed in the window.")
    gpus_per_pod = models.PositiveIntegerField(null=True, blank=True)
    gpu_memory_peak_bytes = models.BigIntegerField(
        null=True, blank=True, help_text="Peak framebuffer of the largest pod, summed over its GPUs."
    )
    gpu_capacity_bytes = models.BigIntegerField(null=True, blank=True, help_text="Framebuffer of one pod's GPUs.")
    kv_cache_peak_ratio = models.FloatField(null=True, blank=True)
    gpu_recommendation = models.TextField(blank=True)
    cpu_request_millicores = models.BigIntegerField(null=True, blank=True)
    cpu_p95_millicores = models.BigIntegerField(null=True, blank=True)
    recommended_cpu_millicores = models.BigIntegerField(null=True, blank=True)
    cpu_recommendation = models.TextField(blank=True)

    class Meta:
        ordering = ["-observed_at", "-id"]
        indexes = [
            models.Index(fields=["kind", "object_id", "observed_at"], name="rs_obs_object_time"),
            # (is_latest, freed_bytes DESC NULLS LAST) on PostgreSQL only, which SQLite cannot
            # declare: migration 0005_report_order_read_from_its_index
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name} at {self.observed_at:%Y-%m-%d %H:%M}"

    @property
    def enough_data(self) -> bool:
        return self.peak_bytes is not None

    @classmethod
    def of(cls, obj: Any, **fields: Any) -> Observation:
        """An (unsaved) observation of a serving object of any kind, its identity copied from it."""
        identity = {
            "cluster_id": obj.cluster_id,
            "kind": obj.kube.kind,
            "object_id": obj.pk,
            "namespace": obj.namespace,
            "name": obj.name,
            "model_name": obj.model_name,
            "node_pool": obj.node_pool,
        }
        return cls(**identity, **fields)


class ReportVersion(models.Model):
    """Which state of the observations the report's figures were computed from.

    PostgreSQL sets ``value`` to a new number from a sequence at every statement that writes
    observations (a trigger on their table: a refresh's insert, an applied recommendation's
    update, an object's or a cluster's delete, TRUNCATE), in the writer's transaction, so cached
    figures keyed by it are never served for data they were not computed from; a sequence is
    never reset by a flush, so no number comes twice. No row (SQLite, or nothing written since a
    flush) means: compute, do not cache.
    """

    value = models.BigIntegerField()

    def __str__(self) -> str:
        return f"observations version {self.value}"
