"""What models hold over time: a sample of every running model's GPUs each ``USAGE_SAMPLE_SECONDS``.

The scheduler knows what each model holds *now* (:func:`scheduler.holdings.load_holdings`, the
rule planning and the dashboard use); the showback needs it over a month, so a periodic task
writes one :class:`governance.models.GpuSample` per running model and period, plus one per node
pool for its GPUs nobody held (team ``unused``): every GPU-hour of a pool is assigned. A model
that held GPUs without serving a request during the period (the cooldown before it scales to
zero) is sampled ``idle``: its GPU-hours count, and the showback shows them as idle cost. The
samples' GPU-seconds are rolled up per day as they are written (:func:`record_samples`).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Max

from governance.models import UNASSIGNED, UNUSED, GpuSample
from governance.rollups import write_gpu_rollup
from governance.teams import best_team, grants
from scheduler.models import NodePool
from scheduler.public import load_holdings


def sample_holdings(now: datetime, every_seconds: int) -> int:
    """Write this period's samples; returns how many.

    The period is the time since the last samples (a late or missed run loses no GPU-hour),
    ``every_seconds`` for the first, and at most twice that (the portal was down: unknown).
    """
    last = GpuSample.objects.aggregate(last=Max("sampled_at"))["last"]
    since = (now - last).total_seconds() if last is not None else every_seconds
    period_seconds = int(min(max(since, 0), 2 * every_seconds))
    if period_seconds <= 0:
        return 0
    period_start = now - timedelta(seconds=period_seconds)
    owners = grants()
    products = {(pool.cluster_id, pool.name): pool.gpu_product for pool in NodePool.objects.all()}
    held: dict[tuple[int, str], int] = defaultdict(int)
    samples = []
    for holding in load_holdings(running_only=True):
        if holding.gpu_count <= 0:
            continue
        held[(holding.cluster_id, holding.pool)] += holding.gpu_count
        idle = holding.last_request_at is None or holding.last_request_at < period_start
        samples.append(GpuSample(
            sampled_at=now, period_seconds=period_seconds,
            team=best_team(owners, holding.cluster_id, holding.namespace, edit_only=True) or UNASSIGNED,
            model=f"{holding.namespace}/{holding.model_name or holding.name}",  # its gateway id
            cluster_id=holding.cluster_id, namespace=holding.namespace,
            node_pool=holding.pool, gpu_product=products.get((holding.cluster_id, holding.pool), ""),
            gpus=holding.gpu_count, idle=idle,
        ))
    for pool in NodePool.objects.filter(gpu_count__gt=0):
        free = pool.gpu_count - held.get((pool.cluster_id, pool.name), 0)
        if free > 0:
            samples.append(GpuSample(sampled_at=now, period_seconds=period_seconds, team=UNUSED, model="",
                                     cluster_id=pool.cluster_id, node_pool=pool.name, gpu_product=pool.gpu_product,
                                     gpus=free))
    record_samples(samples)
    return len(samples)


def record_samples(samples: list[GpuSample]) -> None:
    """Write samples and add them to the GPU rollups (:class:`~governance.models.GpuDay`, what
    showback reads) in one transaction: each sample's GPU-seconds are counted once."""
    with transaction.atomic():
        GpuSample.objects.bulk_create(samples)
        write_gpu_rollup(samples)
