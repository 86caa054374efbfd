"""``manage.py backfill_usage_rollups``: the usage rollups recomputed from the raw records.

Run it once after upgrading to the rollups (migration 0005 creates them empty: the ledger rows
written before are in no rollup until then), and whenever the rollups are in doubt. Idempotent:
a second run finds the same sums. Days before the oldest raw ledger row (their partitions dropped
by retention) keep their rollups. See governance.rollups.rebuild.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from governance.rollups import rebuild


class Command(BaseCommand):
    help = "Recompute the usage rollups (per team, model, hour and day) from the raw ledger and GPU samples."

    def handle(self, *args: Any, **options: Any) -> None:
        done = rebuild()
        if done.first_day is None:
            self.stdout.write("No ledger rows: ledger rollups left as they are.")
        else:
            self.stdout.write(f"Ledger rollups of {done.first_day}..{done.last_day} rebuilt from "
                              f"{done.ledger_rows} rows.")
        self.stdout.write(f"GPU rollups rebuilt from {done.gpu_samples} samples.")
