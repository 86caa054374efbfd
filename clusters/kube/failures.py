"""Controller failures where people look: a condition on the object, a Kubernetes Event, ``lastError``.

A reconcile that fails (the cluster refuses a write, admission refuses, a dependency is missing, a
Job fails) must not stay in a worker's log. Controllers put the failure in the object's ``Ready``
condition (reason and message) and :func:`warn` records a ``Warning`` Event on the object, as
client-go's event recorder does: an Event identical in source, object, type, reason and message
is not created again but counted (``count`` and ``lastTimestamp`` move), so ``kubectl describe``
shows "x5 over 10m". The aggregation key is looked up in the process's informer of the namespace's
Events (``clusters.kube.informers``), which a watch keeps as the cluster has it, so the watcher,
Celery workers and ``sync --once`` count into the same Event.

A write the cluster refused (:func:`report_refusal`) is counted on every pass that tries it again.
A failing condition merely seen again (:func:`warn`: a model waiting for memory, a missing
dependency) is counted again only once ``EVENT_REPEAT_SECONDS`` have passed since the Event's last
count, as client-go's spam filter holds repeats of one object's Events to one per five minutes: an
object that waits unchanged costs the cluster no write on every reconcile and resync.

Which reasons are failures is registered per kind by the controllers (``register_warning_reasons``);
a refusal of the cluster (:func:`refusal_reason`) always is, named by the Status' own reason
(``Invalid``, ``Forbidden``, ``BadRequest``...). :func:`last_error` gives the API's and the page's
``lastError``: the sync's error first (the mirror cannot match), else the failing condition.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils.dateparse import parse_datetime
from kubernetes import client

from clusters.kinds import KindInfo
from clusters.kube.client import ClusterGateway, GatewayError, PermanentError, translated
from clusters.kube.conditions import rfc3339, set_condition
from clusters.kube.informers import informer
from clusters.kube.owned import NotOwnedError, ensure

logger = logging.getLogger(__name__)

COMPONENT = "inference-portal"
CONDITION = "Ready"
SYNC_ERROR = "SyncError"
# The reasons of a Kubernetes Status a refused write carries, by HTTP code, when the body has none.
_REASON_BY_CODE = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
                   422: "Invalid"}
_REFUSALS = frozenset(_REASON_BY_CODE.values()) | {"AlreadyExists", "NotOwned"}
_warning_reasons: dict[str, frozenset[str]] = {}


def register_warning_reasons(kind: str, reasons: set[str]) -> None:
    """Called from an app's ``ready()``: the ``Ready`` reasons of ``kind`` that are failures."""
    _warning_reasons[kind] = frozenset(reasons)


def is_refusal(reason: str) -> bool:
    """True for the reason of a write the cluster refused (as opposed to the controller's own rules)."""
    return reason in _REFUSALS


def is_failure(kind: str, reason: str) -> bool:
    return reason in _REFUSALS or reason in _warning_reasons.get(kind, ())


def refusal(error: GatewayError | NotOwnedError) -> tuple[str, str]:
    """(reason, message) of a write the reconcile could not make: the cluster refused it, or an
    object of the name exists that the portal does not control (``NotOwned``)."""
    if isinstance(error, NotOwnedError):
        return "NotOwned", str(error)
    return refusal_reason(error), refusal_message(error)


def refusal_reason(error: GatewayError) -> str:
    """The cluster's own name for a refusal: the Status' ``reason``, else the one its code implies."""
    return error.body.get("reason") or _REASON_BY_CODE.get(error.status) or "Refused"


def refusal_message(error: GatewayError) -> str:
    """The cluster's message as it gave it (without the code and reason the gateway prefixes)."""
    return error.body.get("message") or str(error)


def failing_condition(kind: str, status: dict[str, Any] | None) -> dict[str, Any] | None:
    """The object's ``Ready`` condition when it says a failure, else None."""
    for condition in (status or {}).get("conditions") or []:
        if condition.get("type") == CONDITION and condition.get("status") == "False":
            return condition if is_failure(kind, condition.get("reason") or "") else None
    return None


FAILING = "Failing"
"""True while ``Ready`` says a failure: its ``lastTransitionTime`` is the first failure of the current
run of failures (``Ready``'s is when it went False, which for a model that was deploying or waiting
first is long before), the ``since`` of ``lastError``."""


def with_failing(kind: str, conditions: list[dict[str, Any]], now: datetime,
                 generation: int | None = None) -> list[dict[str, Any]]:
    """``conditions`` with ``Failing`` following ``Ready``: True (the failure's reason and message)
    while ``Ready`` says a failure, False once it does not (absent until the first failure). Every
    controller status write that sets ``Ready`` passes through here."""
    ready = next((c for c in conditions if c.get("type") == CONDITION), None)
    failing = failing_condition(kind, {"conditions": [ready] if ready else []})
    if failing is not None:
        return set_condition(conditions, FAILING, True, failing["reason"], failing.get("message") or "", now,
                             generation)  # fmt: skip
    if any(c.get("type") == FAILING and c.get("status") == "True" for c in conditions):
        return set_condition(conditions, FAILING, False, "Recovered", "", now, generation)
    return conditions


def last_error(obj: Any) -> dict[str, str] | None:
    """``{"reason", "message", "since"}`` of what is wrong with a mirrored object now, or None.

    The sync's own error comes first (the portal's copy cannot reach the cluster); else the
    controller's failing condition, as the cluster has it in the object's status."""
    if obj.last_error:
        return {"reason": SYNC_ERROR, "message": obj.last_error, "since": rfc3339(obj.updated_at)}
    condition = failing_condition(type(obj).kube.kind, obj.status)
    if condition is None:
        return None
    run = next((c for c in (obj.status or {}).get("conditions") or []
                if c.get("type") == FAILING and c.get("status") == "True"), condition)  # fmt: skip
    return {"reason": condition["reason"], "message": condition.get("message") or "",
            "since": run.get("lastTransitionTime") or ""}


def unschedulable(gateway: ClusterGateway, namespace: str, match_labels: dict[str, str]) -> str | None:
    """The kube-scheduler's word on the first of the selected pods it could not place (their
    ``PodScheduled`` condition, reason ``Unschedulable``: "0/6 nodes are available: 2 Insufficient
    nvidia.com/gpu, ..."), else None. A workload whose pods cannot be placed reports nothing of it
    itself until its progress deadline (10 minutes for a Deployment); the pods say so at once.
    Read from the process's informer of the namespace's pods (no request per starting object)."""
    selector = ",".join(f"{key}={value}" for key, value in sorted(match_labels.items()))
    pods = informer(gateway.cluster, "v1", "Pod", namespace).items(selector=selector)
    for pod in (pod for pod in pods if (pod.get("status") or {}).get("phase") == "Pending"):
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
                return f"pod {pod['metadata']['name']}: {condition.get('message') or 'Unschedulable'}"
    return None


def fail_condition(cr: dict[str, Any], reason: str, message: str, now: datetime) -> list[dict[str, Any]]:
    """The object's conditions with ``Ready`` False for ``reason``: a stale message never stays."""
    generation = cr["metadata"].get("generation")
    conditions = set_condition((cr.get("status") or {}).get("conditions"), CONDITION, False, reason, message, now,
                               generation)  # fmt: skip
    kind = cr.get("kind") or ""
    return with_failing(kind, conditions, now, generation)


def warn(gateway: ClusterGateway, kind: KindInfo, cr: dict[str, Any], now: datetime) -> None:
    """Record a Warning Event for the object's failing ``Ready`` condition, if it has one."""
    condition = failing_condition(kind.kind, cr.get("status"))
    if condition is not None:
        record_event(gateway, kind, cr, "Warning", condition["reason"], condition.get("message") or "", now,
                     repeat_after=timedelta(seconds=settings.EVENT_REPEAT_SECONDS))


def report_refusal(gateway: ClusterGateway, kind: KindInfo, cr: dict[str, Any], reason: str, message: str,
                   now: datetime, held: bool = False) -> dict[str, Any]:
    """A write of this reconcile was refused (:func:`refusal`): put the reason and message in the
    object's ``Ready`` condition and in a Warning Event. Returns the object as the cluster has it after.

    A condition that already says it is not written again; a refusal ``held`` by the backoff (the
    write was not sent again, :class:`HeldRefusal`) counts its Event under the repeat filter of
    :func:`warn`, so an object whose write stays refused costs the cluster no write per pass."""
    metadata = cr["metadata"]
    conditions = fail_condition(cr, reason, message, now)
    if conditions != (cr.get("status") or {}).get("conditions"):
        try:
            cr = gateway.patch_status(kind, metadata["namespace"], metadata["name"], {"conditions": conditions})
        except GatewayError as status_error:  # the Event below still says it
            logger.warning("status of %s %s/%s not written: %s", kind.kind, metadata["namespace"], metadata["name"],
                           status_error)
    record_event(gateway, kind, cr, "Warning", reason, message, now,
                 repeat_after=timedelta(seconds=settings.EVENT_REPEAT_SECONDS) if held else None)
    return cr


REFUSAL_BACKOFF = (timedelta(seconds=30), timedelta(minutes=10))
"""First wait and cap before a write the cluster refused is sent again unchanged (doubling between)."""


def _refusal_key(cr: dict[str, Any], desired: dict[str, Any]) -> str:
    """One refused write: the object (uid), its generation and what was sent. Another generation or
    another body (a wake changes replicas and the request stamp) is another write, tried at once."""
    digest = hashlib.sha256(json.dumps(desired, sort_keys=True, default=str).encode()).hexdigest()[:20]
    return f"refused-write:{cr['metadata'].get('uid')}:{cr['metadata'].get('generation')}:{digest}"


def held_refusal(cr: dict[str, Any], desired: dict[str, Any], now: datetime) -> tuple[str, str] | None:
    """(reason, message) of the cluster's last refusal of this very write while its backoff lasts,
    else None (send it). As client-go's rate-limited work queue backs off a failing item, a write
    the cluster refused is not sent again on every pass: the reconcile reports the same refusal
    (no status write, the Event's repeat filter) until the object's generation or the write changes,
    or the backoff ends (the cause may have changed outside: RBAC, an admission webhook)."""
    entry = cache.get(_refusal_key(cr, desired))
    if entry and now < entry["retry_at"]:
        return entry["reason"], entry["message"]
    return None


def note_refusal(cr: dict[str, Any], desired: dict[str, Any], reason: str, message: str, now: datetime) -> None:
    """The cluster refused ``desired``: wait 30 s before sending it again, doubling up to 10 min."""
    key = _refusal_key(cr, desired)
    attempts = (cache.get(key) or {}).get("attempts", 0) + 1
    first, cap = REFUSAL_BACKOFF
    delay = min(first * 2 ** (attempts - 1), cap)
    cache.set(key, {"attempts": attempts, "retry_at": now + delay, "reason": reason, "message": message},
              int(cap.total_seconds() * 2))  # fmt: skip


class HeldRefusal(PermanentError):
    """A write the cluster refused a moment ago, not sent again while its backoff lasts
    (:func:`held_refusal`); it carries that refusal's reason and message, so every caller handles it
    as the refusal it repeats (``refusal`` reads them back)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message} (not sent again yet: the cluster refused it unchanged)", 0,
                         {"reason": reason, "message": message})


def ensure_backing_off(resource: Any, cr: dict[str, Any], desired: dict[str, Any], now: datetime) -> dict[str, Any]:
    """``clusters.kube.owned.ensure`` of an object ``cr``'s controller owns, with the refused-write
    backoff every controller shares: a write the cluster refused is not sent again unchanged until
    its backoff ends (:class:`HeldRefusal` instead), and a new refusal starts or doubles it
    (:func:`note_refusal`). The refusal is raised (``PermanentError``) for the caller to report."""
    held = held_refusal(cr, desired, now)
    if held is not None:
        raise HeldRefusal(*held)
    try:
        return ensure(resource, desired)
    except PermanentError as error:
        note_refusal(cr, desired, refusal_reason(error), refusal_message(error), now)
        raise


def _same_event(event: dict[str, Any], uid: str, type_: str, reason: str, message: str) -> bool:
    """client-go's aggregation key: source, involved object, type, reason and message."""
    return ((event.get("involvedObject") or {}).get("uid") == uid and event.get("reason") == reason
            and event.get("type") == type_ and event.get("message") == message
            and (event.get("source") or {}).get("component") == COMPONENT)  # fmt: skip


def record_event(gateway: ClusterGateway, kind: KindInfo, cr: dict[str, Any], type_: str, reason: str, message: str,
                 now: datetime, repeat_after: timedelta | None = None) -> None:
    """Create the Event, or count one more of an identical Event (client-go's aggregation key:
    source, involved object, type, reason, message), unless it was last counted less than
    ``repeat_after`` before ``now``. The identical Event is looked up in the process's informer of
    the namespace's Events (kept current by a watch, so every process counts into the Event the
    cluster has, at no request per look), and the answer of the write goes into it at once.
    Failing to record is logged, never raised: an Event is a report, and the reconcile's own
    outcome must not depend on it."""
    metadata = cr["metadata"]
    namespace, uid = metadata["namespace"], metadata.get("uid") or ""
    stamp, message = rfc3339(now), message[:1024]
    try:
        events = informer(gateway.cluster, "v1", "Event", namespace)
        same = next((event for event in events.items() if _same_event(event, uid, type_, reason, message)), None)
        with translated():
            if same is not None:
                last = parse_datetime(same.get("lastTimestamp") or "")
                if repeat_after is not None and last is not None and now - last < repeat_after:
                    return
                counted = {"count": (same.get("count") or 1) + 1, "lastTimestamp": stamp}
                answer = gateway.core.patch_namespaced_event(same["metadata"]["name"], namespace, counted,
                                                             _request_timeout=gateway.timeout)
            else:
                answer = gateway.core.create_namespaced_event(namespace, {
                    "metadata": {"name": f"{metadata['name']}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
                    "involvedObject": {"apiVersion": kind.api_version, "kind": kind.kind, "name": metadata["name"],
                                       "namespace": namespace, "uid": uid,
                                       "resourceVersion": metadata.get("resourceVersion")},
                    "type": type_, "reason": reason, "message": message, "count": 1,
                    "firstTimestamp": stamp, "lastTimestamp": stamp,
                    "source": {"component": COMPONENT, "host": socket.gethostname()},
                    "reportingComponent": COMPONENT, "reportingInstance": f"{socket.gethostname()}-{os.getpid()}",
                }, _request_timeout=gateway.timeout)
        events.wrote(gateway.api_client.sanitize_for_serialization(answer))
    except (GatewayError, client.ApiException) as error:
        logger.warning("event %s on %s %s/%s not recorded: %s", reason, kind.kind, namespace, metadata["name"], error)
