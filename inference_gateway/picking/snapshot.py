"""Each model's replica table, written for its page: per replica the engine's queue, running
requests, KV-cache use and prefix-cache hit rate (its own counters: hits over queries, in tokens),
whether its metrics are fresh, and this worker's picks in the last minute by what decided them.

Every ``SNAPSHOT_SECONDS`` each gateway worker writes one ``ReplicaSnapshot`` row per model it
picked for in the last minute and drops its rows of models it no longer serves: two statements in
one transaction whatever the number of models (one ``INSERT ... ON CONFLICT DO UPDATE`` of every
row, one ``DELETE`` of this worker's rows that write did not stamp), on a connection of its own kept
between writes (its own thread: never the reads' thread requests wait on; a connection opened every
2 s cost more CPU than the write). A worker that picked nothing for a minute, and wrote nothing
since its rows were dropped, writes nothing. The page (``inference_gateway.templatetags.picking``)
merges the workers' rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import DatabaseError, transaction
from django.utils import timezone

from common.db_thread import close_reads, read
from inference_gateway.models import ReplicaSnapshot
from inference_gateway.picking.picker import RECENT_SECONDS, Picker, replica_name

logger = logging.getLogger(__name__)
SNAPSHOT_SECONDS = 2.0
WRITES = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-snapshots")
UNIQUE = ("kind", "cluster", "namespace", "name", "worker")


def worker_name() -> str:
    """This process's name in the table: asked each time, as workers are forked from one supervisor
    (inference_gateway/workers.py), so a name made at import would be theirs alike."""
    return f"{socket.gethostname()}:{os.getpid()}"


def table(picker: Picker, key: tuple, now: float) -> list[dict[str, Any]]:
    """The rows of one model's replicas (those listed at its last request, and those picked in the
    last minute) as this worker sees them now."""
    model = picker.models[key]
    rows = []
    for url in {*model.replicas, *model.recent}:
        picks = model.recent_picks(url, now)
        engine = picker.scraper.states.get(url)
        row: dict[str, Any] = {"replica": replica_name(url), "picks": picks, "fresh": False}
        if engine is not None:
            row.update(waiting=engine.waiting, running=engine.running, kv_usage=round(engine.kv_usage, 4),
                       prefix_hit_rate=round(engine.prefix_hits / engine.prefix_queries, 4)
                       if engine.prefix_queries else None,
                       adapters=sorted(engine.adapters), age=round(now - engine.read_at, 3),
                       fresh=now - engine.read_at <= picker.stale)
        rows.append(row)
    return sorted(rows, key=lambda row: row["replica"])


def _write(tables: dict[tuple, list[dict[str, Any]]]) -> None:
    """Every model's row upserted at once, then this worker's rows not stamped now deleted."""
    stamp, worker = timezone.now(), worker_name()
    rows = [ReplicaSnapshot(kind=kind, cluster_id=cluster_id, namespace=namespace, name=name, worker=worker,
                            replicas=replicas, updated_at=stamp)
            for (kind, cluster_id, namespace, name), replicas in tables.items()]
    with transaction.atomic():
        if rows:
            ReplicaSnapshot.objects.bulk_create(rows, update_conflicts=True, unique_fields=UNIQUE,
                                                update_fields=("replicas", "updated_at"))
        ReplicaSnapshot.objects.filter(worker=worker).exclude(updated_at=stamp).delete()


async def keep_writing(picker: Picker, interval: float = SNAPSHOT_SECONDS) -> None:
    """The loop the gateway runs while it serves (stopped by cancelling it)."""
    held = False  # whether this worker has rows in the table
    while True:
        await asyncio.sleep(interval)
        now = time.monotonic()
        tables = {key: table(picker, key, now) for key, model in picker.models.items()
                  if now - model.last_pick <= RECENT_SECONDS}
        if not tables and not held:
            continue
        try:
            await read(lambda tables=tables: _write(tables), WRITES)
            held = bool(tables)
        except DatabaseError as error:
            logger.info("replica snapshots not written: %s", error)


async def stop(task: asyncio.Task | None) -> None:
    """The loop stopped, its connection closed."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    await close_reads(WRITES)
