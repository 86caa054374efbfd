"""Django's ORM from the gateway's event loop: in a worker thread, one connection per call.

The gateway touches the database only when a cached view expires (every few seconds, not per
request), so holding no connection between calls costs a reconnect now and then, and leaves none
open when the gateway stops (a test database can then be dropped; PostgreSQL's slots stay free).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from django.db import connection

T = TypeVar("T")


def _closing(work: Callable[[], T]) -> T:
    try:
        return work()
    finally:
        connection.close()


async def in_thread(work: Callable[[], T]) -> T:
    """``work()`` in the default executor, its database connection closed afterwards."""
    return await asyncio.get_running_loop().run_in_executor(None, _closing, work)
