"""Short-lived connections to the Celery broker for the web process: the readiness probe and the
task-queue depth gauge, both read on demand (a probe or a scrape), never kept open between them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from kombu import Connection
from kombu.exceptions import ChannelError

# A probe or scrape waits at most this long for the broker, well under the kubelet's and
# Prometheus' own timeouts, so a dead broker gives an answer ("not ready") rather than a timeout.
BROKER_TIMEOUT_SECONDS = 2.0


@contextmanager
def broker_connection() -> Iterator[Connection]:
    """A connected broker connection (raises the transport's error when it cannot connect)."""
    with Connection(
        settings.CELERY_BROKER_URL,
        connect_timeout=BROKER_TIMEOUT_SECONDS,
        transport_options={"socket_timeout": BROKER_TIMEOUT_SECONDS},
    ) as connection:
        connection.ensure_connection(max_retries=0)
        yield connection


def task_queues() -> list[str]:
    """The queues the portal's tasks go to: the default one and every routed one."""
    routed = {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    return sorted({settings.CELERY_TASK_DEFAULT_QUEUE, *routed})


def queue_depths(connection: Connection) -> dict[str, int]:
    """Messages waiting in each task queue. The declare is passive (it never creates a queue with
    other arguments than Celery's); a queue the broker does not know holds nothing."""
    depths = {}
    for queue in task_queues():
        with connection.channel() as channel:
            try:
                depths[queue] = channel.queue_declare(queue=queue, passive=True).message_count
            except ChannelError:
                depths[queue] = 0
    return depths
