"""The Celery app and every periodic schedule, in one place.

Settings come from Django's settings with the ``CELERY_`` prefix. With no broker configured
(the embedded default) ``CELERY_TASK_ALWAYS_EAGER`` runs tasks in-process.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("inference_portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Every periodic schedule, in one place. Each expires before the next run so a backlog never piles up.
app.conf.beat_schedule = {
    "resync-all-clusters": {
        "task": "clusters.tasks.resync_all_clusters",
        "schedule": 300.0,
        "options": {"expires": 240},
    },
}
