"""Who watches a cluster: leader election on a ``coordination.k8s.io/v1`` Lease in that cluster,
as client-go's ``leaderelection`` does it.

A database session lock (the earlier PostgreSQL advisory lock) lives on one connection and is
never checked again: when that connection drops, or under PgBouncer's transaction pooling, two
watchers run. A Lease is checked on every renewal: the holder renews it every ``retry_period``;
one that cannot renew within ``renew_deadline`` stops watching, and another replica takes the
Lease once ``lease_duration`` has passed since the last renewal. Updates carry the Lease's
resourceVersion, so two candidates racing for it cannot both win (the loser gets 409), and are
made from the Lease as read: only the election's fields of the spec change, so the labels and
annotations a deploy put on it (Helm's ownership metadata) are kept.

Durations follow client-go's defaults (15 s lease, 10 s renew deadline, 2 s retry period).
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils.dateparse import parse_datetime
from kubernetes import client

from clusters.kube.client import ClusterGateway, ConflictError, GatewayError, NotFoundError, TransientError, translated

LEASE_PREFIX = "inference-portal-watch"
LEASE_REFUSED = "watch Lease"
"""How the cluster's ``last_error`` starts while the cluster refuses the watcher its Lease."""


def installation_id(database: dict[str, Any] | None = None) -> str:
    """``INSTALLATION_ID``, else a digest of the database this installation keeps its rows in
    (``database``: the default one's settings): the replicas of one portal share it, another
    portal (its own database) has another."""
    if settings.INSTALLATION_ID:
        return settings.INSTALLATION_ID
    database = database or settings.DATABASES["default"]
    where = f"{database.get('HOST') or ''}:{database.get('PORT') or ''}/{database.get('NAME') or ''}"
    return hashlib.sha256(where.encode()).hexdigest()[:10]


def lease_name(database: dict[str, Any] | None = None) -> str:
    """The watch Lease of this installation: several portals may share a cluster, each watching it.
    ``WATCH_LEASE_NAME`` names it outright where the deploy grants the Lease by name."""
    return settings.WATCH_LEASE_NAME or f"{LEASE_PREFIX}-{installation_id(database)}"[:253].lower()


def lease_namespace(namespaces: list[str]) -> str:
    """Where the Lease lives: the cluster's first synced namespace (the portal may write there), else default."""
    return namespaces[0] if namespaces else "default"


def holder_identity() -> str:
    """Unique per process, readable in ``kubectl get lease``: host, pid and a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class LeaseTiming:
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def _micro_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _as_datetime(value: datetime | str | None) -> datetime | None:
    """The typed client gives Lease times as datetimes; be lenient with text as well."""
    return parse_datetime(value) if isinstance(value, str) else value


class LeaseElector:
    """Try to hold one cluster's Lease; ``try_acquire_or_renew`` is one round of the election."""

    def __init__(self, gateway: ClusterGateway, namespace: str, identity: str, timing: LeaseTiming | None = None,
                 name: str | None = None) -> None:
        self.gateway, self.namespace, self.identity, self.name = gateway, namespace, identity, name or lease_name()
        self.holder: str | None = None  # who held the Lease at the last round (another candidate: we wait)
        self.timing = timing or LeaseTiming()
        self.api = client.CoordinationV1Api(gateway.api_client)
        self.last_renewed: float | None = None  # monotonic time of our last successful renewal
        self.refused: str | None = None  # the cluster's refusal of the last round (403...), else None

    def _spec(self, now: datetime, acquired: datetime, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.timing.lease_duration),
            "acquireTime": _micro_time(acquired),
            "renewTime": _micro_time(now),
            "leaseTransitions": transitions,
        }

    def try_acquire_or_renew(self, now: datetime | None = None) -> bool:
        """True when this process holds the Lease after this round (created, renewed or taken over
        after it expired); False when another holder's Lease is still valid or a race was lost."""
        now = now or datetime.now(UTC)
        timeout = self.gateway.timeout
        try:
            with translated():
                lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=timeout)
        except NotFoundError:
            body = {"metadata": {"name": self.name, "namespace": self.namespace}, "spec": self._spec(now, now, 0)}
            try:
                with translated():
                    self.api.create_namespaced_lease(self.namespace, body, _request_timeout=timeout)
            except ConflictError:
                return False
            self.holder = self.identity
            return True
        spec = lease.spec
        holder = self.holder = spec.holder_identity
        renewed = _as_datetime(spec.renew_time)
        duration = timedelta(seconds=spec.lease_duration_seconds or self.timing.lease_duration)
        if holder and holder != self.identity and renewed and now < renewed + duration:
            return False
        taking_over = holder != self.identity
        acquired = now if taking_over else (_as_datetime(spec.acquire_time) or now)
        transitions = (spec.lease_transitions or 0) + (1 if taking_over and holder else 0)
        # Update the Lease as it was read: its labels, annotations (a Helm release's ownership
        # metadata, a GitOps tool's tracking) and spec fields the portal does not set stay as they
        # are; the resourceVersion read makes a racing candidate's update lose with 409.
        body = self.gateway.api_client.sanitize_for_serialization(lease)
        body["spec"] = {**(body.get("spec") or {}), **self._spec(now, acquired, transitions)}
        try:
            with translated():
                self.api.replace_namespaced_lease(self.name, self.namespace, body, _request_timeout=timeout)
        except ConflictError:
            return False
        self.holder = self.identity
        return True

    def release(self) -> None:
        """Give the Lease up at shutdown (an empty holder), so another replica need not wait it out."""
        try:
            with translated():
                lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.gateway.timeout)
                if lease.spec.holder_identity != self.identity:
                    return
                lease.spec.holder_identity = None
                lease.spec.renew_time = None
                self.api.replace_namespaced_lease(self.name, self.namespace, lease,
                                                  _request_timeout=self.gateway.timeout)
        except GatewayError:
            return


def lead_while(elector: LeaseElector, stop: threading.Event, leading: threading.Event) -> None:
    """One election loop until ``stop``: a round every ``retry_period``. ``leading`` is set while
    this process holds the Lease; it is cleared at once when another holder has it, and when the
    renewals have failed (API server unreachable) for longer than ``renew_deadline``: by then
    another replica may be about to take over, so this one must stop acting first."""
    timing = elector.timing
    while not stop.is_set():
        try:
            held = elector.try_acquire_or_renew()
            elector.refused = None
        except TransientError:  # unreachable: the renew deadline below decides
            held = None
        except GatewayError as error:  # refused (403 RBAC, 404 namespace...): the supervisor reports it
            held, elector.refused = None, str(error)
        if held:
            elector.last_renewed = time.monotonic()
            leading.set()
        elif held is False or (
            elector.last_renewed is not None and time.monotonic() - elector.last_renewed > timing.renew_deadline
        ):
            leading.clear()
        stop.wait(timing.retry_period)
