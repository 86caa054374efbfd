"""Timestamps read from PostgreSQL by psycopg's compiled parser instead of Django's Python one.

Django registers its own ``timestamptz`` loader on each connection (``psycopg_any.BaseTzLoader``):
a Python subclass of psycopg's *Python* loader, which parses each value's text in Python and then
sets the connection's time zone on it, about 6 us a value. Pages read many: the planner's 10,000
running models carry a last-request time each (60 ms of a what-if for that alone), an admin page
of 100 rows 500. psycopg_binary's compiled loader parses the same text in about 1 us and, on the
UTC session Django opens, returns the same values with the same ``datetime.timezone.utc``.

The compiled class cannot be subclassed, so :class:`CompiledTimestamptzLoader` holds one and
carries the ``timezone`` attribute Django's ``create_cursor`` compares (a loader without it, or
with another zone, would make Django register its own for every cursor). Registered on each new
connection whose zone is UTC (Django's whenever ``USE_TZ`` is on and the database sets no
``TIME_ZONE``); any other zone, or psycopg without its compiled module, keeps Django's loader.
"""

from __future__ import annotations

import datetime
from typing import Any

from django.db.backends.signals import connection_created
from psycopg.adapt import Loader

try:
    from psycopg_binary._psycopg import TimestamptzLoader as _Compiled
except ImportError:  # psycopg without its compiled module: Django's loader stays
    _Compiled = None


class CompiledTimestamptzLoader(Loader):
    """psycopg's compiled ``timestamptz`` text loader, as Django's loader looks to Django."""

    timezone = datetime.UTC

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        self._compiled = _Compiled(oid, context)

    def load(self, data: Any) -> datetime.datetime:
        return self._compiled.load(data)


def use_compiled_loader(sender: Any, connection: Any, **kwargs: Any) -> None:
    """On a new PostgreSQL connection in UTC: read its timestamps with the compiled loader."""
    if connection.vendor != "postgresql" or _Compiled is None or connection.timezone != datetime.UTC:
        return
    connection.connection.adapters.register_loader("timestamptz", CompiledTimestamptzLoader)


def connect() -> None:
    connection_created.connect(use_compiled_loader, dispatch_uid="clusters-compiled-timestamps")
