"""A platform-scale dataset for benchmarks: clusters, serving models, runs and right-sizing history.

Built once per benchmark run and shared by the benchmark modules (``build()`` returns a
:class:`Dataset` naming what it made), so every page and API figure is measured on the same rows.
Rows are the kinds' reference samples with varied names, pools, memory and status, projected by
the kinds' own ``project()`` as the sync stores them. On PostgreSQL they are written with ``COPY``
(10x faster than ``bulk_create`` for 300,000 rows); elsewhere with ``bulk_create``.

A team member is granted enough namespaces of one cluster to see about ``member_rows``
InferenceModels, so "a team member's page" is measured beside staff's.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, models
from django.utils import timezone

from accounts.models import NamespaceGrant, Team
from clusters.models import Cluster, SyncState
from models_app.models import LAST_REQUEST_ANNOTATION, InferenceModel, KubeAIModel, ModelService
from runs_app.models import InferenceConfig, InferenceRun
from scheduler.models import Node, NodePool
from scheduler.rightsizing.models import Observation, Refresh
from scheduler.rightsizing.policy import evaluate
from tests.support.database import commits_on_disk

GI = 1024**3
NAMESPACES_PER_CLUSTER = 100
POOLS = ("gpu-a100", "gpu-h100", "gpu-l40s", "gpu-l4", "cpu")
NODES_PER_POOL = 4
BATCH = 5_000


@dataclass
class Dataset:
    clusters: list[Cluster]
    staff: User
    member: User
    member_models: int  # InferenceModels the member sees
    member_namespaces: list[str]  # the namespaces of the first cluster granted to the member
    counts: dict[str, int]


def _sample(name: str) -> dict[str, Any]:
    return yaml.safe_load((Path(settings.SAMPLES_DIR) / name).read_text())


def _write(model: type[models.Model], rows: Iterable[models.Model]) -> None:
    """Insert ``rows`` (their ``pk`` already set) by COPY on PostgreSQL, else by ``bulk_create``."""
    if connection.vendor != "postgresql":
        for chunk in _chunks(rows, BATCH):
            model.objects.bulk_create(chunk, batch_size=500)
        return
    fields = [field for field in model._meta.concrete_fields]
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy_:
        for row in rows:
            copy_.write_row(
                [field.get_db_prep_save(field.pre_save(row, add=True), connection) for field in fields]
            )


def _reset_sequences(*model_classes: type[models.Model]) -> None:
    """Rows were written with explicit ids: move each table's id sequence past them."""
    statements = connection.ops.sequence_reset_sql(_no_style(), list(model_classes))
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def _no_style() -> Any:
    from django.core.management.color import no_style

    return no_style()


def _chunks(rows: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _namespace(index: int) -> str:
    return f"team-{index % NAMESPACES_PER_CLUSTER:02d}"


def _inference_models(clusters: list[Cluster], per_cluster: int) -> Iterator[InferenceModel]:
    sample = _sample("inferencemodel-codellama-34b.yaml")
    now = timezone.now()
    pk = 0
    for cluster in clusters:
        for index in range(per_cluster):
            pk += 1
            memory_gi = 8 + (index * 7) % 72
            spec = copy.deepcopy(sample["spec"])
            spec["modelName"] = f"llama-{index % 500}-instruct"
            spec["memory"] = f"{memory_gi}Gi"
            spec["nodeSelector"] = {"inference-pool": POOLS[index % len(POOLS)]}
            spec["dependencies"] = []
            running = index % 3 != 0
            status = {
                "ready": running,
                "replicas": 1 if running else 0,
                "observedPeakMemory": f"{max(1, memory_gi - 1 - index % 9)}Gi",
                "utilizationPercent": 50 + index % 50,
            }
            last_request = now - timedelta(minutes=index % 240)
            row = InferenceModel(
                pk=pk,
                cluster=cluster,
                namespace=_namespace(index),
                name=f"model-{index:05d}",
                uid=f"{cluster.pk}-{index}",
                resource_version=str(index),
                labels=sample["metadata"]["labels"],
                annotations={LAST_REQUEST_ANNOTATION: last_request.isoformat()},
                spec=spec,
                status=status,
                last_synced_spec=spec,
                sync_state=SyncState.SYNCED if index % 50 else SyncState.PENDING_APPLY,
            )
            row.project()
            yield row


def _kubeai_models(clusters: list[Cluster], total: int) -> Iterator[KubeAIModel]:
    sample = _sample("model-gemma2-2b-cpu.yaml")
    for index in range(total):
        spec = copy.deepcopy(sample["spec"])
        row = KubeAIModel(
            pk=index + 1,
            cluster=clusters[index % len(clusters)],
            namespace=_namespace(index // len(clusters)),
            name=f"kubeai-{index:05d}",
            spec=spec,
            status={"replicas": {"all": 1, "ready": index % 2}},
            sync_state=SyncState.SYNCED,
        )
        row.project()
        yield row


def _model_services(clusters: list[Cluster], total: int) -> Iterator[ModelService]:
    sample = _sample("modelservice-qwen3-8b.yaml")
    for index in range(total):
        spec = copy.deepcopy(sample["spec"])
        spec["decode"]["nodeSelector"] = {"inference-pool": POOLS[index % len(POOLS)]}
        row = ModelService(
            pk=index + 1,
            cluster=clusters[index % len(clusters)],
            namespace=_namespace(index // len(clusters)),
            name=f"service-{index:05d}",
            spec=spec,
            status={"phase": "Ready" if index % 4 else "Pending"},
            sync_state=SyncState.SYNCED,
        )
        row.project()
        yield row


def _runs(clusters: list[Cluster], total: int) -> Iterator[InferenceRun]:
    sample = _sample("inferencerun-iris-run-january.yaml")
    now = timezone.now()
    for index in range(total):
        namespace = _namespace(index // len(clusters))
        spec = copy.deepcopy(sample["spec"])
        spec["configRef"] = {"name": "example-inference-config", "namespace": namespace}
        row = InferenceRun(
            pk=index + 1,
            cluster=clusters[index % len(clusters)],
            namespace=namespace,
            name=f"run-{index:05d}",
            spec=spec,
            status={"phase": ("Succeeded", "Running", "Failed")[index % 3]},
            sync_state=SyncState.SYNCED,
            cluster_created_at=now - timedelta(minutes=index),
        )
        row.project()
        yield row


def _configs(clusters: list[Cluster]) -> Iterator[InferenceConfig]:
    sample = _sample("inferenceconfig-example-inference-config.yaml")
    pk = 0
    for cluster in clusters:
        for index in range(NAMESPACES_PER_CLUSTER):
            pk += 1
            row = InferenceConfig(
                pk=pk, cluster=cluster, namespace=_namespace(index), name="example-inference-config",
                spec=sample["spec"], sync_state=SyncState.SYNCED,
            )  # fmt: skip
            row.project()
            yield row


def _observations(
    model_rows: list[tuple[int, int, str, str, str, str, int | None]],
    refreshes: dict[tuple[int, bool], Refresh],
    total: int,
) -> Iterator[Observation]:
    """``total`` observations spread over the models: the newest of each model is_latest. Each is
    judged by the right-sizing policy itself, so its saving (``freed_bytes``) is the one every page shows."""
    per_model = max(1, total // len(model_rows))
    pk = 0
    for model_id, cluster_id, namespace, name, model_name, pool, declared in model_rows:
        peak = int((declared or 0) * (0.4 + (model_id % 50) / 100))
        verdict = evaluate(declared, peak) if declared else None
        for age in range(per_model):
            pk += 1
            latest = age == 0
            refresh = refreshes[(cluster_id, latest)]
            yield Observation(
                pk=pk, refresh=refresh, cluster_id=cluster_id, kind="InferenceModel", object_id=model_id,
                namespace=namespace, name=name, model_name=model_name, node_pool=pool,
                observed_at=refresh.started_at, is_latest=latest, samples=288, declared_bytes=declared,
                peak_bytes=peak or None, ratio=verdict and verdict.ratio,
                utilization_percent=verdict and verdict.utilization_percent,
                recommended_bytes=verdict and verdict.recommended_bytes, freed_bytes=verdict and verdict.freed_bytes,
                recommendation=verdict.recommendation if verdict else "",
                overprovisioned=bool(verdict and verdict.overprovisioned),
            )  # fmt: skip


def _pools(clusters: list[Cluster]) -> None:
    pools = [
        NodePool(
            cluster=cluster, name=name, node_count=NODES_PER_POOL, allocatable_bytes=NODES_PER_POOL * 640 * GI,
            largest_node_bytes=640 * GI, gpu_count=NODES_PER_POOL * 8, gpu_memory_bytes=80 * GI,
        )
        for cluster in clusters
        for name in POOLS
    ]  # fmt: skip
    NodePool.objects.bulk_create(pools)
    pools = list(NodePool.objects.filter(cluster__in=clusters))
    Node.objects.bulk_create(
        Node(pool=pool, name=f"{pool.name}-{index}", allocatable_bytes=640 * GI, capacity_bytes=660 * GI,
             gpu_count=8, gpu_memory_bytes=80 * GI)
        for pool in pools
        for index in range(NODES_PER_POOL)
    )  # fmt: skip


def build(
    clusters: int = 10,
    models_per_cluster: int = 10_000,
    kubeai_models: int = 10_000,
    model_services: int = 10_000,
    runs: int = 10_000,
    observations: int = 200_000,
    member_rows: int = 1_000,
    analyze: bool = True,
) -> Dataset:
    """Write the dataset into the (empty) current database and return what it holds.

    ``analyze`` refreshes the planner's statistics as autovacuum would after such a load (the
    benchmarks need it for realistic plans; query-count tests do not).
    """
    cluster_rows = Cluster.objects.bulk_create(
        Cluster(name=f"cluster-{index:02d}", server_url=f"https://cluster-{index:02d}:6443", healthy=True)
        for index in range(clusters)
    )
    _pools(cluster_rows)
    _write(InferenceModel, _inference_models(cluster_rows, models_per_cluster))
    _write(KubeAIModel, _kubeai_models(cluster_rows, kubeai_models))
    _write(ModelService, _model_services(cluster_rows, model_services))
    _write(InferenceConfig, _configs(cluster_rows))
    _write(InferenceRun, _runs(cluster_rows, runs))
    now = timezone.now()
    refreshes = {}
    for cluster in cluster_rows:
        for latest in (False, True):
            started = now - timedelta(hours=0 if latest else 1)
            refreshes[(cluster.pk, latest)] = Refresh.objects.create(
                cluster=cluster, started_at=started, finished_at=started, window_seconds=86400, ok=True,
                queries=4, models_seen=models_per_cluster, models_with_data=models_per_cluster,
            )  # fmt: skip
    model_rows = list(
        InferenceModel.objects.order_by("pk").values_list(
            "pk", "cluster_id", "namespace", "name", "model_name", "node_pool", "memory_bytes"
        )
    )
    _write(Observation, _observations(model_rows, refreshes, observations))
    _reset_sequences(InferenceModel, KubeAIModel, ModelService, InferenceConfig, InferenceRun, Observation)
    if analyze and connection.vendor == "postgresql":
        # As autovacuum would after a load: plans see the real row counts, index-only scans the
        # visibility map. VACUUM cannot run in a transaction (the tests build inside one).
        if not connection.in_atomic_block:
            commits_on_disk()  # else VACUUM leaves the pages of rows committed asynchronously not all-visible
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE" if connection.in_atomic_block else "VACUUM ANALYZE")
    staff = User.objects.create_user("bench-staff", is_staff=True)
    member = User.objects.create_user("bench-member")
    team = Team.objects.create(name="bench-team")
    team.members.add(member)
    namespaces = max(1, member_rows * NAMESPACES_PER_CLUSTER // max(1, models_per_cluster))
    NamespaceGrant.objects.bulk_create(
        NamespaceGrant(team=team, cluster=cluster_rows[0], namespace=_namespace(index)) for index in range(namespaces)
    )
    return Dataset(
        clusters=cluster_rows,
        staff=staff,
        member=member,
        member_namespaces=[_namespace(index) for index in range(namespaces)],
        member_models=InferenceModel.objects.filter(
            cluster=cluster_rows[0], namespace__in=[_namespace(index) for index in range(namespaces)]
        ).count(),
        counts={
            "InferenceModel": clusters * models_per_cluster,
            "Model": kubeai_models,
            "ModelService": model_services,
            "InferenceRun": runs,
            "Observation": len(model_rows) * max(1, observations // max(1, len(model_rows))),
        },
    )
