"""Audit entries for the page benchmarks: one "created by the sync" entry per InferenceModel.

The audit log grows with every change the portal and the sync record, so at 100,000 objects it
holds at least as many entries: the audit page is measured on that many. Written with COPY
(``clusters.sync.bulk.insert``, as the sync records its own), spread over the last 30 days.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from clusters.models import AuditEntry
from clusters.sync.bulk import insert
from models_app.models import InferenceModel
from tests.support.database import commits_on_disk


def add_audit_entries() -> int:
    """One entry per InferenceModel row; returns how many were written."""
    now = timezone.now()
    # read before the COPY starts: the connection cannot fetch from a cursor while it streams one
    rows = list(InferenceModel.objects.order_by("pk").values_list("pk", "cluster_id", "namespace", "name"))

    def entries() -> Iterator[AuditEntry]:
        for number, (pk, cluster_id, namespace, name) in enumerate(rows):
            yield AuditEntry(
                kind="InferenceModel", object_id=pk, cluster_id=cluster_id, namespace=namespace, name=name,
                action=AuditEntry.Action.CREATED, source=AuditEntry.Source.SYNC, actor_label="cluster: bench",
                changes=[], message="", at=now - timedelta(seconds=number * 26),
            )  # fmt: skip

    insert(AuditEntry, entries())
    if connection.vendor == "postgresql":
        # as bench/dataset.py does after its load: autovacuum would otherwise take its turn on the
        # 100,000 new rows while a benchmark measures (run by run, at different moments)
        if not connection.in_atomic_block:
            commits_on_disk()  # else VACUUM leaves the pages of rows committed asynchronously not all-visible
        with connection.cursor() as cursor:
            table = AuditEntry._meta.db_table
            cursor.execute(f"ANALYZE {table}" if connection.in_atomic_block else f"VACUUM ANALYZE {table}")
    return AuditEntry.objects.count()
