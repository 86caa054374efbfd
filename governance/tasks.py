"""Periodic work of the governance app (schedules in config/celery_app.py)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from governance.partitions import maintain
from governance.sampling import sample_holdings


@shared_task
def maintain_ledger_partitions() -> list[str]:
    """Next months' partitions of the usage ledger, and the retention of old ones."""
    return maintain(timezone.now(), settings.USAGE_LEDGER_RETENTION_MONTHS)


@shared_task
def sample_gpu_holdings(every_seconds: int | None = None) -> int:
    """What every running model holds now, for the showback's GPU-hours: run every
    ``every_seconds`` (default ``USAGE_SAMPLE_SECONDS``, beat's schedule; the live demo, which runs
    no beat, calls it itself)."""
    return sample_holdings(timezone.now(), every_seconds or settings.USAGE_SAMPLE_SECONDS)
