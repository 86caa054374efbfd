"""Right-sizing history: every refresh of a cluster and every observation of a model."""

from __future__ import annotations

from django.db import models

from clusters.models import Cluster
from models_app.models import InferenceModel


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
        get_latest_by = "started_at"

    def __str__(self) -> str:
        return f"{self.cluster} {self.started_at:%Y-%m-%d %H:%M} {'ok' if self.ok else 'failed'}"


class Observation(models.Model):
    """What one refresh saw for one InferenceModel, and what the policy made of it.

    ``peak_bytes`` is None when there was not enough data (fewer samples than the policy's
    minimum): then there is no utilization and no recommendation, never a made-up number.
    ``ratio`` is the true peak/declared (above 1 when the model outgrew its declaration);
    ``utilization_percent`` is the clamped 0..100 value written to status.
    """

    refresh = models.ForeignKey(Refresh, on_delete=models.CASCADE, related_name="observations")
    model = models.ForeignKey(InferenceModel, on_delete=models.CASCADE, related_name="rightsizing_observations")
    observed_at = models.DateTimeField(db_index=True)
    is_latest = models.BooleanField(default=True, db_index=True)
    node_pool = models.TextField(blank=True)  # a copy of InferenceModel.node_pool
    samples = models.PositiveIntegerField(default=0)
    declared_bytes = models.BigIntegerField(null=True, blank=True)
    peak_bytes = models.BigIntegerField(null=True, blank=True)
    ratio = models.FloatField(null=True, blank=True)
    utilization_percent = models.PositiveSmallIntegerField(null=True, blank=True)
    recommended_bytes = models.BigIntegerField(null=True, blank=True)
    recommendation = models.TextField(blank=True)
    overprovisioned = models.BooleanField(default=False)
    gpu_memory_peak_bytes = models.BigIntegerField(null=True, blank=True)
    kv_cache_peak_ratio = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-observed_at", "-id"]
        indexes = [models.Index(fields=["model", "observed_at"])]

    def __str__(self) -> str:
        return f"{self.model} at {self.observed_at:%Y-%m-%d %H:%M}"

    @property
    def enough_data(self) -> bool:
        return self.peak_bytes is not None
