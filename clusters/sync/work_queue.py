"""One reconcile per object at a time, as controller-runtime's work queue guarantees.

Watch events, the periodic pass and wakes can each ask for the same object's reconcile at the
same moment, from different Celery workers. Two reconciles of one object at once race on its
Deployment and status; ten queued in a burst do the same work ten times. So a reconcile runs
under a per-object lease in the shared cache (``cache.add`` is atomic in Redis): a request that
finds it held only marks the object *dirty* and returns, and the holder runs once more when it
is done, so no request is lost and none runs twice at once. A reconcile pass of a cluster is
guarded the same way: a pass that outlasts the polling interval is not overlapped by the next.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TypeVar

from django.core.cache import cache

T = TypeVar("T")
LEASE_SECONDS = 300  # longer than any reconcile; frees the key if a worker dies holding it
BUSY = "already being reconciled; it runs once more when the current one ends"


def run_exclusively(key: str, work: Callable[[], T], busy: T) -> T:
    """``work()`` under the lease ``key``; when another holds it, mark it dirty and return ``busy``.
    The holder repeats ``work()`` while requests arrived during its run."""
    dirty = f"{key}:dirty"
    token = uuid.uuid4().hex
    if not cache.add(key, token, LEASE_SECONDS):
        cache.set(dirty, 1, LEASE_SECONDS)
        return busy
    try:
        while True:
            cache.delete(dirty)
            result = work()
            if not cache.get(dirty):
                break
    finally:
        if cache.get(key) == token:
            cache.delete(key)
    if cache.get(dirty):  # asked for between the last check and the release: run once more
        return run_exclusively(key, work, busy)
    return result


def run_when_free(key: str, work: Callable[[], T], wait_seconds: float, then: Callable[[], T]) -> T | None:
    """``work()`` under the lease ``key``, waiting up to ``wait_seconds`` for its holder to finish
    (None when it does not): another object's reconcile acting on this one (a preemption) must
    neither run beside this object's own reconcile nor be dropped as a duplicate. Requests that
    arrived meanwhile (marked dirty) run as ``then()`` afterwards, so none is lost."""
    token, deadline = uuid.uuid4().hex, time.monotonic() + wait_seconds
    while not cache.add(key, token, LEASE_SECONDS):
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)
    try:
        result = work()
    finally:
        if cache.get(key) == token:
            cache.delete(key)
    if cache.get(f"{key}:dirty"):
        run_exclusively(key, then, result)
    return result


def object_key(label: str, pk: int) -> str:
    return f"reconcile:{label}:{pk}"


def pass_key(cluster_id: int) -> str:
    return f"reconcile-pass:{cluster_id}"
