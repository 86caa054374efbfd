"""Mirrors of Krateo's batch-inference kinds: a static InferenceConfig and the runs that use it."""

from __future__ import annotations

from typing import Any

from croniter import croniter
from django.db import models

from clusters.kinds import KindInfo, register
from clusters.models import KubeObject
from clusters.validation.schemas import FieldError


@register
class InferenceConfig(KubeObject):
    """``InferenceConfig``: the model endpoint, runner image and raw storage input/output."""

    kube = KindInfo("ai.krateo.io", "v1", "InferenceConfig", "inferenceconfigs")

    # Sized as models_app.models.ServingModel's columns: whatever the CRD allows is stored.
    model_name = models.TextField(blank=True, editable=False)
    model_url = models.TextField(blank=True, editable=False)
    image = models.TextField(blank=True, editable=False)
    auto_delete_policy = models.CharField(max_length=32, blank=True, editable=False)

    @classmethod
    def projected_fields(cls) -> list[str]:
        return ["model_name", "model_url", "image", "auto_delete_policy"]

    def project(self) -> None:
        spec = self.spec or {}
        self.model_name = spec.get("modelName", "")
        self.model_url = spec.get("modelUrl", "")
        self.image = spec.get("image", "")
        self.auto_delete_policy = spec.get("autoDeletePolicy", "")


@register
class InferenceRun(KubeObject):
    """``InferenceRun``: one execution of a config with parameters, run as a Job (or CronJob)."""

    kube = KindInfo("ai.krateo.io", "v1", "InferenceRun", "inferenceruns")

    config_name = models.TextField(blank=True, editable=False)
    config_namespace = models.TextField(blank=True, editable=False)
    timeout_seconds = models.PositiveBigIntegerField(null=True, blank=True, editable=False)  # int64 in the CRD
    schedule = models.TextField(blank=True, editable=False)
    phase = models.CharField(max_length=16, blank=True, db_index=True, editable=False)

    class Meta(KubeObject.Meta):
        # the run list and the dashboard's recent runs read the newest first
        indexes = [models.Index(fields=["-created_at"], name="runs_app_run_newest_first")]

    @classmethod
    def projected_fields(cls) -> list[str]:
        return ["config_name", "config_namespace", "timeout_seconds", "schedule", "phase"]

    @classmethod
    def extra_rules(cls, manifest: dict[str, Any]) -> list[FieldError]:
        schedule = manifest["spec"].get("schedule")
        if schedule and not _is_cronjob_schedule(schedule):
            return [
                FieldError(
                    "spec.schedule",
                    schedule,
                    "is not a cron schedule (five fields such as "
                    "'0 3 * * *', or @hourly/@daily/@weekly/@monthly/@yearly)",
                )
            ]
        return []

    @classmethod
    def referenced_namespaces(cls, manifest: dict[str, Any]) -> dict[str, str]:
        """The config's namespace: its image runs and its storage is copied into this run's contract."""
        namespace = (manifest["spec"].get("configRef") or {}).get("namespace")
        return {"spec.configRef.namespace": namespace} if namespace else {}

    def project(self) -> None:
        spec, status = self.spec or {}, self.status or {}
        config_ref = spec.get("configRef") or {}
        self.config_name = config_ref.get("name", "")
        self.config_namespace = config_ref.get("namespace") or self.namespace
        self.timeout_seconds = spec.get("timeoutSeconds")
        self.schedule = spec.get("schedule", "")
        self.phase = status.get("phase", "")


_CRON_DESCRIPTORS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}


def _is_cronjob_schedule(schedule: str) -> bool:
    """What a Kubernetes CronJob accepts: five fields or a descriptor (croniter also takes 6-7 fields)."""
    if schedule.strip() in _CRON_DESCRIPTORS:
        return True
    return len(schedule.split()) == 5 and croniter.is_valid(schedule)
