"""Django's ORM from the gateway's event loop: in a worker thread, one connection per call.

The gateway touches the database only when a cached view expires (every few seconds, not per
request), so holding no connection between calls costs a reconnect now and then, and leaves none
open when the gateway stops (a test database can then be dropped; PostgreSQL's slots stay free).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TypeVar

from django.db import connection

T = TypeVar("T")

# Calls to the clusters (replica discovery, last-request stamps) and wakes, which hold a thread for
# up to the wake timeout, each get threads of their own: a burst of them never leaves the database
# reads that requests wait on (the catalog, API tokens) without a thread.
CLUSTER_CALLS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="gateway-cluster")
WAKES = ThreadPoolExecutor(max_workers=64, thread_name_prefix="gateway-wake")


def _closing(work: Callable[[], T]) -> T:
    try:
        return work()
    finally:
        connection.close()


async def in_thread(work: Callable[[], T], executor: Executor | None = None) -> T:
    """``work()`` in ``executor`` (the loop's default one for database reads), its database
    connection closed afterwards."""
    return await asyncio.get_running_loop().run_in_executor(executor, _closing, work)
