"""Catalog change notices: PostgreSQL ``NOTIFY`` from triggers, ``LISTEN`` in the gateway.

A model created, renamed, moved or deleted must be routable (or gone) within milliseconds of its
commit (the notice's trip to the gateway; a request sent before it lands sees the table as it was). The
triggers (migration ``0002_catalog_notices``) notify channel :data:`CHANNEL` whenever a serving
kind's row is inserted or deleted, or its identity, model name, spec or sync state changes, and
whenever staff's placement decisions or teams' namespace grants change: whatever writes the row
(portal, API, admin, the sync's bulk writes, a shell), and only when its transaction commits, as
PostgreSQL delivers notices on commit. Each notice names the table that changed, and a serving
kind's also the row (``table id``, migration ``0003_catalog_notices_name_the_row``); limits, teams
and memberships notify the same channel (governance migration 0003): the gateway listens on one
connection of its own and marks stale only what reads that table (``Catalog.changed`` for
:data:`CATALOG_TABLES`, reading only the rows named; the governance tables for theirs), so the next
request reads a table that has the change and a model's edit does not make every worker re-read the
teams. A lost connection (TCP keepalives find a silent one within about half a minute) is
re-opened, and counts as a notice of every table (some may have been missed: the catalog then
compares its rows' versions); without notices (SQLite, or while reconnecting) the periodic reads
are all there is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import psycopg
from django.db import connection

logger = logging.getLogger(__name__)
CHANNEL = "inference_gateway_catalog"
RETRY_SECONDS = 1.0
# the tables whose rows the routes are read from (the triggers of migration 0002)
CATALOG_TABLES = frozenset({
    "models_app_inferencemodel", "models_app_kubeaimodel", "models_app_modelservice",
    "inference_gateway_sharednamespace", "inference_gateway_backendhost", "inference_gateway_sharedgatewayid",
    "accounts_namespacegrant", "clusters_cluster",
})  # fmt: skip
# A connection that went silent (a dropped network path) is found by TCP keepalives: 10 s idle,
# then 3 probes 5 s apart, so within about 25 s (libpq's options).
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}


def _conninfo() -> str:
    settings = connection.settings_dict
    options = {key: value for key, value in (settings.get("OPTIONS") or {}).items()
               if key in ("sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "options")}
    return psycopg.conninfo.make_conninfo(
        dbname=settings["NAME"], user=settings.get("USER") or None, password=settings.get("PASSWORD") or None,
        host=settings.get("HOST") or None, port=settings.get("PORT") or None,
        application_name="inference-gateway-notices", **{**KEEPALIVES, **options},
    )


def parse(payload: str) -> tuple[str, int | None]:
    """A notice's table, and its row's id where it names one (``table id``)."""
    table, _, row = payload.partition(" ")
    return table, int(row) if row.isdigit() else None


async def listen(
    on_change: Callable[[str | None, int | None], None], connected: asyncio.Event | None = None
) -> None:
    """Call ``on_change`` with the changed table's name and row id (None where the notice names no
    row) for every notice until cancelled (table None: any table may have changed, while not
    listening); ``connected`` is set once listening."""
    if connection.vendor != "postgresql":
        return
    conninfo = _conninfo()
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as listener:
                await listener.execute(f"LISTEN {CHANNEL}")
                on_change(None, None)  # whatever happened while not listening
                if connected is not None:
                    connected.set()
                async for notice in listener.notifies():
                    on_change(*parse(notice.payload))
        except (psycopg.Error, OSError) as error:
            if connected is not None:
                connected.clear()
            logger.warning("catalog notices: %s; listening again in %g s", error, RETRY_SECONDS)
            await asyncio.sleep(RETRY_SECONDS)
