"""Django's ORM from the gateway's event loop, in worker threads.

**Reads the request path depends on** (the catalog every few seconds, API token checks) run in one
thread that keeps its database connection between calls (``read``): opening one costs about 5 ms
of CPU, more than the catalog's queries themselves, and a thread doing Python work holds the GIL
the event loop needs, so reconnecting on every reload stalled requests every 2 seconds. A
connection that failed, or is older than ``CONN_MAX_AGE``, is replaced before the next read; the
gateway closes it when it stops (``close_reads``), so none is left open (a test database can then
be dropped; PostgreSQL's slots stay free).

**Calls to the clusters** (replica discovery, last-request stamps) and wakes, which hold a thread
for up to the wake timeout, each get threads of their own and a connection per call
(``in_thread``): a burst of them never leaves the reads that requests wait on without a thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TypeVar

from django.db import connection

T = TypeVar("T")

READS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-db")
CLUSTER_CALLS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="gateway-cluster")
WAKES = ThreadPoolExecutor(max_workers=64, thread_name_prefix="gateway-wake")


def _closing(work: Callable[[], T]) -> T:
    try:
        return work()
    finally:
        connection.close()


def _close() -> None:
    connection.close()  # looked up here: ``connection`` is the calling thread's own


def _reusing(work: Callable[[], T]) -> T:
    connection.close_if_unusable_or_obsolete()
    return work()


async def in_thread(work: Callable[[], T], executor: Executor) -> T:
    """``work()`` in ``executor``, its database connection closed afterwards."""
    return await asyncio.get_running_loop().run_in_executor(executor, _closing, work)


async def read(work: Callable[[], T], executor: Executor = READS) -> T:
    """``work()`` in the reads' thread (or another single thread: ``executor``), on its kept connection."""
    return await asyncio.get_running_loop().run_in_executor(executor, _reusing, work)


async def close_reads(executor: Executor = READS) -> None:
    """Close the reads' connection (the gateway stops)."""
    await asyncio.get_running_loop().run_in_executor(executor, _close)
