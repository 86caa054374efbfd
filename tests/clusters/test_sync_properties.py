"""Random interleavings of portal edits (fresh, from stale copies, concurrent), cluster edits, faults,
resyncs racing the watcher, a watcher losing its Lease to another replica, and deletes always end
with portal and cluster equal, except for conflicts that are surfaced; no write is ever silently
lost, reverted or cancels a delete."""

from __future__ import annotations

import itertools
import threading
import time
from unittest import mock

import pytest
from django.db import connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from clusters.kube.client import ClusterGateway
from clusters.kube.watching import Backoff, WatchSettings
from clusters.models import AuditEntry, SyncState
from clusters.sync import resync
from clusters.sync.audit import Actor
from clusters.sync.inbound import upsert_from_cluster
from clusters.sync.leader import LeaseTiming
from clusters.sync.outbound import apply_object
from clusters.sync.resync import resync_cluster
from clusters.sync.watch_supervisor import ClusterSupervisor
from clusters.web.edits import EditRefused, ObjectDeleting
from clusters.web.services import request_delete, save_portal_edit
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest, wait_for

KIND = InferenceModel.kube
FIELDS = {"memory": lambda n: f"{n}Gi", "cooldownPeriod": lambda n: f"{n}m"}
FINALIZER = "inference.eh-ops.io/finalizer"
field = st.sampled_from(sorted(FIELDS))
operations = st.lists(
    st.one_of(
        st.tuples(st.just("portal"), field),
        st.tuples(st.just("cluster"), field),
        st.tuples(st.just("copy")),
        st.tuples(st.just("from copy"), field),
        st.tuples(st.just("concurrent labels")),
        st.tuples(st.just("resync racing watcher"), field),
        st.tuples(st.just("delete")),
        st.tuples(st.just("fault"), st.sampled_from(["patch", "create"]), st.sampled_from([409, 429, 500])),
        st.tuples(st.just("fault"), st.just("get"), st.sampled_from([429, 500])),
        st.tuples(st.just("resync")),
        st.tuples(st.just("lost leader"), field),
    ),
    min_size=1,
    max_size=8,
)
names = itertools.count()


class Run:
    """One example's object, and what the portal and the cluster wrote to it."""

    def __init__(self, cluster, kube, user) -> None:
        self.cluster, self.kube, self.user = cluster, kube, user
        self.name = f"m-{next(names)}"
        self.values = itertools.count(20)
        self.last_write: dict[str, tuple[str, str]] = {}  # field -> (side, value) of the latest write
        self.labels: dict[str, str] = {}  # labels the portal accepted
        self.must_surface = False  # a portal edit over a cluster change the portal had not seen
        self.copy: tuple[str, dict] | None = None  # (version, spec) of a copy taken earlier
        self.deleted = False
        manifest = sample_manifest("inferencemodel-mistral-7b.yaml", kube.namespace)
        manifest["metadata"]["name"] = self.name
        kube.write(manifest)
        resync_cluster(cluster)

    def row(self) -> InferenceModel:
        return InferenceModel.objects.get(cluster=self.cluster, name=self.name)

    def value(self, name: str) -> str:
        return FIELDS[name](next(self.values))

    def portal_edit(self, spec: dict, name: str, made_from: str) -> None:
        """Save ``spec`` with ``name`` changed, as made from version ``made_from``; check the refusals."""
        obj = self.row()
        value = self.value(name)
        stale, deleting = made_from != obj.edit_version(), obj.sync_state == SyncState.DELETING
        unseen = self.kube.read(KIND, self.name)["spec"].get(name) != (obj.last_synced_spec or {}).get(name)
        obj.spec = {**spec, name: value}
        try:
            save_portal_edit(obj, Actor("prop", "api"), made_from=made_from)
        except ObjectDeleting:
            assert deleting, "refused as deleting while not deleting"
            return
        except EditRefused:
            assert stale and not deleting, "a current copy was refused"
            return
        assert not (stale or deleting), "an edit from a stale copy, or of a deleting object, was saved"
        self.must_surface |= unseen and obj.sync_state != SyncState.CONFLICT
        self.last_write[name] = ("portal", value)

    def cluster_edit(self, name: str) -> None:
        current = self.kube.read(KIND, self.name)
        value = self.value(name)
        current["spec"][name] = value
        self.kube.write(current)
        self.last_write[name] = ("cluster", value)

    def concurrent_labels(self) -> None:
        """Two API clients PATCH a label each at the same moment, each in its own thread and connection."""
        start, answers, bodies = threading.Barrier(2), {}, {}
        keys = [f"c{next(self.values)}" for _ in range(2)]

        def patch(key: str) -> None:
            client = APIClient()
            client.force_authenticate(self.user)
            start.wait()
            try:
                body = {"metadata": {"labels": {key: "x"}}}
                answer = client.patch(f"/api/inferencemodels/{self.row().pk}/", body, format="json")
                answers[key] = answer.status_code
                bodies[key] = answer.content[:500]
            finally:
                connections.close_all()

        threads = [threading.Thread(target=patch, args=(key,)) for key in keys]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(answers.values()) == [409 if self.deleted else 200] * 2, (answers, bodies)
        if not self.deleted:
            self.labels |= dict.fromkeys(keys, "x")

    def resync_racing_watcher(self, name: str) -> None:
        """A resync lists; before it writes, the cluster changes and the watcher records the change."""
        real_list_pages = resync.list_pages

        def list_then_watcher_writes(gateway, model, *args, **kwargs):
            for began, page in real_list_pages(gateway, model, *args, **kwargs):
                if model is InferenceModel:  # the page is listed; before it is stored, the watcher writes
                    self.cluster_edit(name)
                    upsert_from_cluster(InferenceModel, self.cluster, self.kube.read(KIND, self.name))
                yield began, page

        with mock.patch.object(resync, "list_pages", list_then_watcher_writes):
            resync_cluster(self.cluster)
        obj, in_cluster = self.row(), self.kube.read(KIND, self.name)
        if obj.sync_state == SyncState.SYNCED:  # the list's older copy must not have replaced the watcher's
            assert (obj.spec, obj.resource_version) == (in_cluster["spec"], in_cluster["metadata"]["resourceVersion"])

    def lost_leader(self, name: str) -> None:
        """The replica watching the cluster loses its Lease (its API server connection fails, 503
        from the proxy it goes through): it stops watching within its lease, before another
        replica, reaching the API server directly, takes over; a cluster edit made after the
        handover reaches the portal through the new leader: nothing is lost, never two at once."""
        timing = LeaseTiming(lease_duration=1.5, renew_deadline=1.0, retry_period=0.2)
        fast = WatchSettings(timeout_range=(5, 6), backoff=lambda: Backoff(initial=0.05, maximum=0.5), idle_close=0.3)
        stops = threading.Event(), threading.Event()
        direct = self.kube.plane.api_client

        def replica(number: int, **options) -> ClusterSupervisor:
            return ClusterSupervisor(self.cluster.pk, stops[number], fast, timing, f"replica-{next(names)}",
                                     report=lambda _: None, check_every=0.1, **options).start()

        old, new, lost = replica(0), None, None
        try:
            wait_for(old.watching.is_set, timeout=15, message="the first replica to watch")
            lost = self.kube.proxy.inject("*", "leases", status=503, times=None)
            lost_at = time.monotonic()
            wait_for(lambda: not old.watching.is_set(), timeout=15, message="the lost leader to stop watching")
            assert time.monotonic() - lost_at < timing.lease_duration + 1.0, "the lost leader watched past its lease"
            new = replica(1, gateway_factory=lambda cluster: ClusterGateway(cluster, api_client=direct()))
            wait_for(new.watching.is_set, timeout=15, message="the other replica to take over")
            assert not old.watching.is_set(), "two replicas watched at once"
            self.cluster_edit(name)
            in_cluster = self.kube.read(KIND, self.name)["metadata"]["resourceVersion"]
            if self.row().sync_state == SyncState.SYNCED:
                wait_for(lambda: self.row().resource_version == in_cluster, timeout=15,
                         message="the new leader to record the edit")
        finally:
            if lost is not None:
                lost.times = 0  # the proxy lets the old replica's requests through again
            for stop in stops:
                stop.set()
            for supervisor in (old, new):
                assert supervisor is None or supervisor.join(15), "a replica did not stop"

    def delete(self) -> None:
        """A controller holds the object with a finalizer; the portal deletes it (``Deleting``)."""
        if self.deleted:
            return
        current = self.kube.read(KIND, self.name)
        current["metadata"]["finalizers"] = [FINALIZER]
        self.kube.write(current, field_manager="controller")
        request_delete(self.row(), Actor("prop", "api"))
        self.deleted = True

    def settle(self) -> None:
        """The controller lets the object go; retries and the periodic sweep run."""
        self.kube.proxy.clear_faults()
        if self.deleted and self.kube.read(KIND, self.name):
            held = self.kube.read(KIND, self.name)
            held["metadata"]["finalizers"] = []
            self.kube.write(held, field_manager="controller")
        for _ in range(4):
            obj = self.row()
            if obj.sync_state in (SyncState.PENDING_APPLY, SyncState.DELETING):
                apply_object(InferenceModel, obj.pk)
            resync_cluster(self.cluster)


@pytest.mark.usefixtures("needs_faults")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=operations)
def test_random_interleavings_converge_or_surface_conflicts(live_cluster, kube, make_user, steps) -> None:
    run = Run(live_cluster, kube, make_user(f"prop-{next(names)}", perms=["models_app.change_inferencemodel"]))
    for step in steps:
        if step[0] == "portal":
            obj = run.row()
            run.portal_edit(obj.spec, step[1], obj.edit_version())
        elif step[0] == "cluster":
            run.cluster_edit(step[1])
        elif step[0] == "copy":
            run.copy = (run.row().edit_version(), run.row().spec)
        elif step[0] == "from copy" and run.copy:
            run.portal_edit(run.copy[1], step[1], run.copy[0])
        elif step[0] == "concurrent labels":
            run.concurrent_labels()
        elif step[0] == "resync racing watcher":
            run.resync_racing_watcher(step[1])
        elif step[0] == "delete":
            run.delete()
        elif step[0] == "fault":
            kube.proxy.inject(step[1], "inferencemodels", name=run.name, status=step[2], times=1)
        elif step[0] == "lost leader":
            run.lost_leader(step[1])
        elif step[0] == "resync":
            resync_cluster(live_cluster)
    run.settle()

    obj = run.row()
    if run.deleted:
        assert obj.sync_state == SyncState.DELETED_IN_CLUSTER and kube.read(KIND, run.name) is None
        return
    in_cluster = kube.read(KIND, run.name)
    assert obj.sync_state in (SyncState.SYNCED, SyncState.CONFLICT), (obj.sync_state, obj.last_error)
    assert run.labels.items() <= obj.labels.items(), "a label a concurrent PATCH added was lost"
    if obj.sync_state == SyncState.SYNCED:
        assert obj.spec == in_cluster["spec"] and obj.labels == in_cluster["metadata"].get("labels", {})
    conflicted = {field["path"].removeprefix("spec.") for field in (obj.conflict or {}).get("fields", [])}
    if obj.sync_state == SyncState.CONFLICT:
        assert conflicted, "a Conflict must name its fields"
        for name in conflicted:
            assert obj.spec[name] != in_cluster["spec"][name]
    if run.must_surface:
        surfaced = AuditEntry.objects.filter(kind="InferenceModel", object_id=obj.pk, action="conflict")
        assert surfaced.exists(), "a portal edit overwrote a cluster change it had never seen, without a conflict"
    for name, (side, value) in run.last_write.items():
        holder = in_cluster["spec"] if side == "cluster" else obj.spec
        assert holder[name] == value, f"the last {side} write of {name} ({value}) was lost"
        if side == "portal" and obj.sync_state == SyncState.SYNCED:  # a Conflict holds the whole edit back
            assert in_cluster["spec"].get(name) == value, f"portal write of {name} never reached the cluster"
