"""The demo's right-sizing history (platform/demo/observations.yaml) through the real policies.

Each day of the file becomes a Refresh and one Observation per object, built by
:func:`scheduler.rightsizing.refresh.observe` from the figures Prometheus would have returned, and
the newest one is written into the status (of the kinds that carry it) the way a refresh writes it. So the
demo has one saving per model, the same on every page. Idempotent: the demo cluster's earlier
history is replaced.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.kinds import all_models
from clusters.models import Cluster
from clusters.validation.quantities import quantity_to_int
from scheduler.rightsizing.conf import default_policy
from scheduler.rightsizing.models import Observation, Refresh
from scheduler.rightsizing.refresh import Figures, observe, store_status, with_status

SAMPLES_PER_DAY = 1440  # one-minute scrapes


def _figures(entry: dict[str, Any], day: int) -> Figures:
    last = day == len(entry["peaks"]) - 1
    return Figures(
        peak_bytes=quantity_to_int(entry["peaks"][day]),
        samples=SAMPLES_PER_DAY * (day + 1),
        gpu_memory_peak_bytes=quantity_to_int(entry.get("gpuMemoryPeak")) if last else None,
        gpu_memory_size_bytes=quantity_to_int(entry.get("gpuMemory")) if last else None,
        kv_cache_peak_ratio=entry.get("kvCachePeak") if last else None,
    )


def _objects(cluster: Cluster, keys: list[str]) -> dict[str, Any]:
    by_kind = {model.kube.kind: model for model in all_models()}
    found = {}
    for key in keys:
        kind, _, path = key.partition(" ")
        namespace, _, name = path.partition("/")
        obj = by_kind[kind].objects.filter(cluster=cluster, namespace=namespace, name=name).first()
        if obj is not None:
            found[key] = obj
    return found


def load_demo_observations(cluster: Cluster, now: datetime | None = None) -> int:
    """Replace ``cluster``'s right-sizing history with the demo week; returns the observations made."""
    history = yaml.safe_load((Path(settings.DEMO_DIR) / "observations.yaml").read_text()) or {}
    now = (now or timezone.now()).replace(minute=0, second=0, microsecond=0)
    policy = default_policy()
    objects = _objects(cluster, list(history))
    days = max((len(entry["peaks"]) for entry in history.values()), default=0)
    made = 0
    with transaction.atomic():
        Refresh.objects.filter(cluster=cluster).delete()
        for day in range(days):
            at = now - timedelta(days=days - 1 - day)
            refresh = Refresh.objects.create(
                cluster=cluster, started_at=at, finished_at=at, window_seconds=policy.window_seconds, ok=True,
                models_seen=len(objects), models_with_data=len(objects), queries=7,
            )  # fmt: skip
            observations = []
            for key, obj in objects.items():
                observation = observe(obj, _figures(history[key], day), policy, at)
                observation.refresh, observation.is_latest = refresh, day == days - 1
                observations.append(observation)
            Observation.objects.bulk_create(observations)
            made += len(observations)
        store_status(with_status(list(objects.values()), observations))
    return made
