"""The kept pool totals (scheduler.pool_totals) equal a fresh sum over the rows after every kind of write.

The reference is computed here from the rows themselves, in Python, not from the totals' SQL:
each write path the portal has (ORM saves and deletes, queryset updates, the bulk resync's COPY and
``UPDATE ... FROM``, a cluster's cascade delete, rows marked deleted in the cluster) and a move
between pools, for every serving kind.
"""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster, SyncState
from clusters.sync.bulk import copy_new, staged_update
from models_app.models import InferenceModel, KubeAIModel, ModelService
from scheduler.holdings import serving_models
from scheduler.models import PoolTotal
from scheduler.pool_totals import _SUMS, pool_totals, recount, rows_by_sync_state
from tests.scheduler.conftest import make_model

pytestmark = pytest.mark.django_db(transaction=True)


def _sample(name: str) -> dict[str, Any]:
    return yaml.safe_load((Path(settings.SAMPLES_DIR) / name).read_text())


def _state(row: dict[str, Any]) -> str:
    if (row["running_replicas"] or 0) > 0:
        return PoolTotal.State.REPORTED
    if row["running_replicas"] is None and (row["replicas"] or 0) > 0:
        return PoolTotal.State.DESIRED
    return PoolTotal.State.STOPPED


def fresh() -> dict[tuple, tuple]:
    """(kind, cluster, pool, state) -> (models, memory, GPUs, peaks, advised), summed over the rows now."""
    sums: dict[tuple, Counter] = {}
    for model in serving_models():
        peak = "observed_peak_bytes" if any(f.name == "observed_peak_bytes" for f in model._meta.get_fields()) else None
        fields = ["cluster_id", "node_pool", "running_replicas", "replicas", "memory_bytes", "gpu_count", "status"]
        rows = model.objects.exclude(sync_state=SyncState.DELETED_IN_CLUSTER)
        for row in rows.values(*fields, *filter(None, [peak])):
            key = (model.kube.kind, row["cluster_id"], row["node_pool"], _state(row))
            total = sums.setdefault(key, Counter())
            total.update(
                models=1, memory=row["memory_bytes"] or 0, gpus=row["gpu_count"] or 0,
                peak=(row.get(peak) or 0) if peak else 0, advised=int("recommendation" in (row["status"] or {})),
            )  # fmt: skip
    return {key: (c["models"], c["memory"], c["gpus"], c["peak"], c["advised"]) for key, c in sums.items()}


def kept() -> dict[tuple, tuple]:
    return {
        (t.kind, t.cluster_id, t.node_pool, t.state): (t.model_count, t.memory_bytes, t.gpus, t.observed_peak_bytes,
                                                        t.advised)
        for t in pool_totals()
    }  # fmt: skip


def assert_current() -> None:
    assert kept() == fresh()
    assert PoolTotal.objects.count() == len(fresh())  # no line of zero models lingers
    with CaptureQueriesContext(connection) as queries:  # the dashboard's counts by sync state, every kind at once
        kept_by_state = rows_by_sync_state(serving_models())
    assert len(queries) == 1
    assert {type(rows) for by_state in kept_by_state.values() for rows in by_state.values()} <= {int}  # not numeric
    for model in serving_models():
        counted = Counter(model.objects.values_list("sync_state", flat=True))
        assert kept_by_state[model] == dict(counted), model.kube.kind


def kubeai(cluster: Cluster, name: str, pool: str, replicas: int | None) -> KubeAIModel:
    spec = copy.deepcopy(_sample("model-llama-3.1-8b-instruct-fp8-l4.yaml")["spec"])
    spec["resourceProfile"] = "nvidia-gpu-l4:2"
    row = KubeAIModel(cluster=cluster, namespace="default", name=name, spec=spec, sync_state=SyncState.SYNCED,
                      status={"replicas": {"all": replicas}} if replicas is not None else {})  # fmt: skip
    row.save()
    return row


def service(cluster: Cluster, name: str, pool: str, decode: int, memory: str = "8Gi") -> ModelService:
    spec = {"model": {"name": "q"}, "accelerator": {"type": "nvidia"},
            "decode": {"replicas": decode, "resources": {"requests": {"memory": memory}},
                       "nodeSelector": {"inference-pool": pool}}}  # fmt: skip
    row = ModelService(cluster=cluster, namespace="default", name=name, sync_state=SyncState.SYNCED, spec=spec)
    row.save()
    return row


@pytest.fixture
def other(db) -> Cluster:
    return Cluster.objects.create(name="other", server_url="https://10.0.0.9:6443", managed_kinds=["InferenceModel"])


def test_every_kind_through_the_orm(cluster, other):
    assert_current()
    running = make_model(cluster, "running", "40Gi", peak="30Gi", replicas=1, gpu="1")
    stopped = make_model(cluster, "stopped", "48Gi", replicas=0)
    make_model(other, "unknown", "4Gi", replicas=None)
    ai = kubeai(cluster, "qwen", "gpu", 1)
    svc = service(cluster, "svc", "gpu", 2)
    assert_current()
    assert len({key[0] for key in kept()}) == 3  # every kind counted
    # edits: memory, replicas reported, a move between pools, for each kind
    running.spec["memory"] = "60Gi"
    running.save()
    stopped.status = {"replicas": 1}
    stopped.save()
    assert_current()
    running.spec["nodeSelector"] = {"inference-pool": "cpu"}
    running.save()
    svc.spec["decode"]["nodeSelector"] = {"inference-pool": "cpu"}
    svc.spec["decode"]["replicas"] = 3
    svc.save()
    ai.status = {"replicas": {"all": 0}}
    ai.save()
    assert_current()
    assert ("InferenceModel", cluster.pk, "cpu", PoolTotal.State.REPORTED) in kept()
    # a status-only change moves no total
    before = kept()
    running.annotations = {"inference.eh-ops.io/last-request-time": "2026-11-26T10:00:00+00:00"}
    running.save()
    assert kept() == before
    for row in (running, ai, svc):
        row.delete()
    assert_current()


def test_queryset_writes_and_deleted_in_cluster(cluster):
    for index in range(6):
        make_model(cluster, f"m{index}", f"{index + 1}Gi", replicas=index % 2)
    InferenceModel.objects.filter(name__in=["m0", "m1"]).update(sync_state=SyncState.DELETED_IN_CLUSTER)
    assert_current()
    InferenceModel.objects.filter(name="m2").update(running_replicas=3, node_pool="elsewhere")
    assert_current()
    InferenceModel.objects.filter(name__in=["m3", "m4"]).delete()
    InferenceModel.objects.filter(name="m0").update(sync_state=SyncState.SYNCED)
    assert_current()
    # every state below and above Synced, as the dashboard counts them
    for state, name in zip(
        (SyncState.PENDING_APPLY, SyncState.CONFLICT, SyncState.ERROR, SyncState.DELETING),
        ("m0", "m2", "m5", "m1"),
        strict=True,
    ):
        InferenceModel.objects.filter(name=name).update(sync_state=state)
        assert_current()


def bulk_rows(cluster: Cluster, count: int) -> list[InferenceModel]:
    """Unsaved, projected InferenceModels over 3 namespaces, 4 pools, 7 sizes, half of them running:
    what the bulk resync's COPY writes."""
    rows = []
    for index in range(count):
        row = InferenceModel(cluster=cluster, namespace=f"team-{index % 3}", name=f"bulk-{index}",
                             sync_state=SyncState.SYNCED, status={"replicas": index % 2},
                             spec={"modelName": "m", "memory": f"{index % 7 + 1}Gi", "backendUrl": "http://m:8000",
                                   "nodeSelector": {"inference-pool": f"pool-{index % 4}"}})  # fmt: skip
        row.project()
        rows.append(row)
    return rows


def test_bulk_ingest_paths(cluster, other):
    rows = bulk_rows(cluster, 50)
    with transaction.atomic():
        copy_new(InferenceModel, rows, len(rows))
    assert_current()
    for row in rows[:20]:
        row.spec["memory"] = "33Gi"
        row.spec["nodeSelector"] = {"inference-pool": "moved"}
        row.status = {"replicas": 1}
        row.project()
    with transaction.atomic():
        staged_update(InferenceModel, rows[:20], ["cluster", "namespace", "name"],
                      ["spec", "status", *InferenceModel.projected_fields()])  # fmt: skip
    assert_current()
    InferenceModel.objects.bulk_create(
        [InferenceModel(cluster=other, namespace="x", name=f"b{i}", sync_state=SyncState.SYNCED, **_columns(rows[i]))
         for i in range(10)]
    )  # fmt: skip
    service(other, "svc", "pool-1", 1)
    assert_current()
    cluster.delete()  # cascades to its models
    assert_current()
    assert {key[1] for key in kept()} == {other.pk}


def _columns(row: InferenceModel) -> dict[str, Any]:
    return {field: getattr(row, field) for field in ["spec", "status", *InferenceModel.projected_fields()]}


def test_a_recount_finds_what_was_kept(cluster, other):
    make_model(cluster, "a", "10Gi", peak="8Gi")
    make_model(other, "b", "20Gi", replicas=None)
    service(cluster, "svc", "gpu", 1)
    before = kept()
    PoolTotal.objects.all().delete()
    recount()
    assert kept() == before == fresh()


def test_totals_are_built_in_the_models_field_order() -> None:
    """pool_totals builds PoolTotal positionally (id, the key, then the sums in _SUMS order)."""
    names = [field.attname for field in PoolTotal._meta.concrete_fields]
    assert names == ["id", "kind", "cluster_id", "node_pool", "state", *_SUMS]
