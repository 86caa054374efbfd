"""``{% replica_table obj %}``: how the gateway picks among a serving model's replicas, on its page.

One row per replica the gateway picked in the last minute: the engine's queue, running requests,
KV-cache use and prefix-cache hit rate as its metrics last said, whether they are fresh, and the
picks of the last minute with what decided them, summed over the gateway's workers (each writes
its own view: ``inference_gateway.picking.snapshot``). Rows older than ``SHOWN_SECONDS`` are a
gateway that stopped or a model no longer asked for, and are not shown.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from django import template
from django.utils import timezone

from inference_gateway.models import ReplicaSnapshot
from models_app.models import ServingModel

register = template.Library()
SHOWN_SECONDS = 30


def merged(model: ServingModel) -> list[dict[str, Any]]:
    """Each replica's row: picks summed over the workers, the engine's state from the newest row."""
    snapshots = ReplicaSnapshot.objects.filter(
        kind=model.kube.kind, cluster_id=model.cluster_id, namespace=model.namespace, name=model.name,
        updated_at__gte=timezone.now() - timedelta(seconds=SHOWN_SECONDS)).order_by("updated_at")
    replicas: dict[str, dict[str, Any]] = {}
    for snapshot in snapshots:  # oldest first: a newer worker's engine state replaces an older one's
        for row in snapshot.replicas:
            kept = replicas.setdefault(row["replica"], {"picks": Counter()})
            kept["picks"].update(row.get("picks") or {})
            kept.update({key: value for key, value in row.items() if key != "picks"})
    rows = []
    for name, row in sorted(replicas.items()):
        picks: Counter = row["picks"]
        rows.append({**row, "replica": name, "total": sum(picks.values()),
                     "deciders": ", ".join(f"{scorer} {count}" for scorer, count in picks.most_common())})
    return rows


@register.inclusion_tag("inference_gateway/_replica_table.html")
def replica_table(model: Any) -> dict[str, Any]:
    if not isinstance(model, ServingModel):
        return {"shown": False}
    return {"shown": True, "rows": merged(model)}
