"""Celery tasks of gitops: following pull requests and checking drift (config/celery_app.py's beat)."""

from __future__ import annotations

from celery import shared_task

from gitops.drift import check_drift
from gitops.follow import follow_pull_requests


@shared_task(acks_late=True)
def follow_pull_requests_task() -> int:
    return follow_pull_requests()


@shared_task(acks_late=True)
def check_drift_task() -> int:
    return check_drift()
