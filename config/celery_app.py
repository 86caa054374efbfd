"""The Celery app and every periodic schedule, in one place.

Settings come from Django's settings with the ``CELERY_`` prefix. With no broker configured
(the embedded default) ``CELERY_TASK_ALWAYS_EAGER`` runs tasks in-process.
"""

import os

from celery import Celery
from celery.signals import worker_process_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("inference_portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.autodiscover_tasks(["clusters.sync"])  # the sync's tasks live in a sub-package of the app


@worker_ready.connect
@worker_process_init.connect
def _tune_collector(**_: object) -> None:
    """A worker's tasks decode JSON as requests do: freeze the startup heap (see common.gc_tuning).

    ``worker_process_init`` runs in each prefork child once it is set up, ``worker_ready`` in the
    main process (the solo and thread pools run tasks there).
    """
    from common.gc_tuning import tune_collector

    tune_collector()


@worker_ready.connect
@worker_process_init.connect
def _tracing(**_: object) -> None:
    """Traces of the tasks run here, when an OTLP endpoint is set (common.tracing), in the process
    that runs them (as ``_tune_collector``)."""
    from common.tracing import configure_tracing

    configure_tracing("inference-portal-worker")


def _polling_interval_seconds() -> float:
    """POLLING_INTERVAL (a duration such as ``1m`` or ``300s``), as the reference controller reads it."""
    from django.conf import settings

    from common.durations import parse_duration

    interval = parse_duration(settings.POLLING_INTERVAL)
    if not interval:
        raise ValueError(f"POLLING_INTERVAL={settings.POLLING_INTERVAL!r} is not a duration such as 1m or 300s")
    return interval.total_seconds()


def _setting(name: str) -> object:
    from django.conf import settings

    return getattr(settings, name)


# Every periodic schedule, in one place. Each expires before the next run so a backlog never piles up.
app.conf.beat_schedule = {
    "resync-all-clusters": {  # repairs what watches missed; re-queues applies left waiting
        "task": "clusters.sync.tasks.resync_all_clusters",
        "schedule": 300.0,
        "options": {"expires": 240},
    },
    "reconcile-managed-kinds": {  # the portal as controller, every POLLING_INTERVAL
        "task": "clusters.sync.tasks.reconcile_managed_clusters",
        "schedule": _polling_interval_seconds(),
        "options": {"expires": _polling_interval_seconds()},
    },
    "refresh-node-pools": {  # pool capacity from the clusters' Nodes
        "task": "scheduler.tasks.refresh_node_pools_task",
        "schedule": 600.0,
        "options": {"expires": 540},
    },
    "refresh-rightsizing": {  # observed peaks from Prometheus, recommendations, write-back
        "task": "scheduler.rightsizing.tasks.refresh_all_rightsizing",
        "schedule": 3600.0,
        "options": {"expires": 3000},
    },
    "sample-gpu-holdings": {  # what every model holds, for the showback's GPU-hours (governance/)
        "task": "governance.tasks.sample_gpu_holdings",
        "schedule": float(_setting("USAGE_SAMPLE_SECONDS")),
        "options": {"expires": float(_setting("USAGE_SAMPLE_SECONDS")) * 0.9},
    },
    "follow-pull-requests": {  # GitOps mode: merged, closed, applied (gitops/)
        "task": "gitops.tasks.follow_pull_requests_task",
        "schedule": float(_setting("GITOPS_FOLLOW_SECONDS")),
        "options": {"expires": float(_setting("GITOPS_FOLLOW_SECONDS")) * 0.9},
    },
    "check-gitops-drift": {  # GitOps mode: the cluster against Git's files
        "task": "gitops.tasks.check_drift_task",
        "schedule": float(_setting("GITOPS_DRIFT_SECONDS")),
        "options": {"expires": float(_setting("GITOPS_DRIFT_SECONDS")) * 0.9},
    },
    "maintain-ledger-partitions": {  # next months' ledger partitions, retention of old ones
        "task": "governance.tasks.maintain_ledger_partitions",
        "schedule": 86400.0,
        "options": {"expires": 80000},
    },
}
