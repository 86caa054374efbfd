"""Random interleavings of portal edits, cluster edits, faults and resyncs always end with portal and
cluster equal, except for conflicts that are surfaced; no write is ever silently lost."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.audit import Actor
from clusters.models import AuditEntry, SyncState
from clusters.outbound import apply_object
from clusters.resync import resync_cluster
from clusters.services import save_portal_edit
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest

KIND = InferenceModel.kube
FIELDS = {"memory": lambda n: f"{n}Gi", "cooldownPeriod": lambda n: f"{n}m"}
operations = st.lists(
    st.one_of(
        st.tuples(st.just("portal"), st.sampled_from(sorted(FIELDS))),
        st.tuples(st.just("cluster"), st.sampled_from(sorted(FIELDS))),
        st.tuples(st.just("fault"), st.sampled_from(["patch", "create"]), st.sampled_from([409, 429, 500])),
        st.tuples(st.just("fault"), st.just("get"), st.sampled_from([429, 500])),
        st.tuples(st.just("resync")),
    ),
    min_size=1,
    max_size=8,
)
names = itertools.count()


@pytest.mark.usefixtures("needs_faults")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=operations)
def test_random_interleavings_converge_or_surface_conflicts(live_cluster, kube, steps) -> None:
    name = f"m-{next(names)}"
    manifest = sample_manifest("inferencemodel-mistral-7b.yaml", kube.namespace)
    manifest["metadata"]["name"] = name
    kube.write(manifest)
    resync_cluster(live_cluster)
    values = itertools.count(20)
    last_write: dict[str, tuple[str, str]] = {}  # field -> (side, value) of the latest write
    must_surface = False  # a portal edit over a cluster change the portal had not seen

    for step in steps:
        obj = InferenceModel.objects.get(cluster=live_cluster, name=name)
        if step[0] == "portal":
            value = FIELDS[step[1]](next(values))
            unseen = kube.read(KIND, name)["spec"].get(step[1]) != (obj.last_synced_spec or {}).get(step[1])
            must_surface |= unseen and obj.sync_state != SyncState.CONFLICT
            obj.spec = {**obj.spec, step[1]: value}
            save_portal_edit(obj, Actor("prop", "api"), made_from=None)
            last_write[step[1]] = ("portal", value)
        elif step[0] == "cluster":
            current = kube.read(KIND, name)
            value = FIELDS[step[1]](next(values))
            current["spec"][step[1]] = value
            kube.write(current)
            last_write[step[1]] = ("cluster", value)
        elif step[0] == "fault":
            kube.proxy.inject(step[1], "inferencemodels", name=name, status=step[2], times=1)
        else:
            resync_cluster(live_cluster)

    kube.proxy.clear_faults()
    for _ in range(4):  # what the retries and the periodic sweep do
        obj = InferenceModel.objects.get(cluster=live_cluster, name=name)
        if obj.sync_state == SyncState.PENDING_APPLY:
            apply_object(InferenceModel, obj.pk)
        resync_cluster(live_cluster)
    obj = InferenceModel.objects.get(cluster=live_cluster, name=name)
    in_cluster = kube.read(KIND, name)["spec"]

    assert obj.sync_state in (SyncState.SYNCED, SyncState.CONFLICT), (obj.sync_state, obj.last_error)
    if obj.sync_state == SyncState.SYNCED:
        assert obj.spec == in_cluster
    conflicted = {field["path"].removeprefix("spec.") for field in (obj.conflict or {}).get("fields", [])}
    if obj.sync_state == SyncState.CONFLICT:
        assert conflicted, "a Conflict must name its fields"
        for field in conflicted:
            assert obj.spec[field] != in_cluster[field]
    if must_surface:
        surfaced = AuditEntry.objects.filter(kind="InferenceModel", object_id=obj.pk, action="conflict")
        assert surfaced.exists(), "a portal edit overwrote a cluster change it had never seen, without a conflict"
    for field, (side, value) in last_write.items():
        holder = in_cluster if side == "cluster" else obj.spec
        assert holder[field] == value, f"the last {side} write of {field} ({value}) was lost"
        if side == "portal" and obj.sync_state == SyncState.SYNCED:  # a Conflict holds the whole edit back
            assert in_cluster.get(field) == value, f"portal write of {field} never reached the cluster"
