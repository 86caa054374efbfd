"""What other apps use of gitops: the periodic work Celery beat runs (``gitops.tasks``), for the
live demo, which runs no beat (devstack/live_demo.py, ``make run GITOPS=1``)."""

from gitops.drift import check_drift
from gitops.follow import follow_pull_requests

__all__ = ["check_drift", "follow_pull_requests"]
