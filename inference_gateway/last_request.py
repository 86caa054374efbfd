"""The last request, where the reference puts it: ``inference.eh-ops.io/last-request-time`` on the
model's Deployment (reference 000, "Auto-generated Annotations" of managed Deployments).

**Why the Deployment, by a direct merge patch, and not the portal's write path.** The portal's
write path (edit the row, apply through clusters/sync/outbound.py) is for what people intend: every
stamp there would be an audited edit of the InferenceModel, a PendingApply row and a three-way
merge, and it would change the custom resource's ``metadata.resourceVersion`` every few seconds,
so a person's edit in flight would keep meeting a newer object (more merges, more chances of a
Conflict). The Deployment is not mirrored as a row: stamping it changes nothing the sync
compares, so it cannot lose or conflict with anyone's update. The controller's cooldown reads the
newest stamp of the model and of its Deployment (models_app.controller.last_request_time) and
carries it into the Deployment it applies, so the stamp survives the controller's own writes.

**Never backwards.** Each stamp reads the Deployment and patches only when its own time is newer
than the one there, naming the ``resourceVersion`` it read: a concurrent writer (another gateway
replica, the controller) makes the patch fail with 409 and the stamp is retried on the newer
object, so an older time never replaces a newer one.

**At most one write per model per ``interval`` seconds** per gateway process: requests in
between only move the time the next write will carry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime

from django.utils.dateparse import parse_datetime
from kubernetes import client

from clusters.kube.client import ClusterGateway, ConflictError, GatewayError, NotFoundError, translated
from clusters.kube.conditions import rfc3339
from clusters.models import Cluster
from common.db_thread import CLUSTER_CALLS, in_thread
from inference_gateway.routes import Route
from models_app.models import LAST_REQUEST_ANNOTATION, InferenceModel

logger = logging.getLogger(__name__)
ATTEMPTS = 3


def stamp(route: Route, at: datetime) -> str:
    """Blocking (a worker thread): move the Deployment's annotation to ``at`` unless it is newer
    already. Returns what happened (for logs and tests)."""
    gateway = ClusterGateway(Cluster.objects.get(pk=route.cluster_id))
    apps = client.AppsV1Api(gateway.api_client)
    try:
        for _ in range(ATTEMPTS):
            with translated():
                current = apps.read_namespaced_deployment(route.name, route.namespace, _request_timeout=gateway.timeout)
            there = parse_datetime((current.metadata.annotations or {}).get(LAST_REQUEST_ANNOTATION) or "")
            if there is not None and there >= at.replace(microsecond=0):
                return "newer already"
            patch = {"metadata": {"resourceVersion": current.metadata.resource_version,
                                  "annotations": {LAST_REQUEST_ANNOTATION: rfc3339(at)}}}
            try:
                with translated():
                    apps.patch_namespaced_deployment(
                        route.name, route.namespace, patch, _content_type="application/merge-patch+json",
                        _request_timeout=gateway.timeout,
                    )
                return "stamped"
            except ConflictError:
                continue
        return "gave up after conflicts"
    except NotFoundError:
        return "no Deployment"
    finally:
        gateway.close()


class LastRequests:
    """Throttled stamps, written in the background so no request waits for the API server. A
    request inside the interval schedules one write at its end (if none is scheduled), carrying
    the newest request's time, so the last request of a burst is always recorded."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.next_write: dict[tuple, float] = {}
        self.pending: dict[tuple, float] = {}  # Unix time, made a datetime only when written
        self.scheduled: set[tuple] = set()
        self.tasks: set[asyncio.Task] = set()

    def seen(self, route: Route) -> None:
        if route.kind != InferenceModel.kube.kind:
            return
        self.pending[route.key] = time.time()
        if route.key in self.scheduled:
            return
        now = time.monotonic()
        delay = max(0.0, self.next_write.get(route.key, 0.0) - now)
        self.next_write[route.key] = now + delay + self.interval
        self.scheduled.add(route.key)
        task = asyncio.ensure_future(self._write(route, delay))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _write(self, route: Route, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        self.scheduled.discard(route.key)
        seen_at = self.pending.pop(route.key, None)
        if seen_at is None:
            return
        at = datetime.fromtimestamp(seen_at, tz=UTC)
        try:
            outcome = await in_thread(lambda: stamp(route, at), CLUSTER_CALLS)
        except GatewayError as error:
            outcome = f"failed: {error}"
        logger.debug("last request of %s at %s: %s", route.model, rfc3339(at), outcome)

    async def drain(self) -> None:
        """Wait for the writes under way (on shutdown, so the last stamp is not lost)."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)
