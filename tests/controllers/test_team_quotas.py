"""Team quotas with borrowing on the real control plane (issue 27): the portal as InferenceModel
controller admits the models of two teams into the session's ``gpu-a100`` pool (2 kwok nodes x 4
GPUs, read from the Nodes), each team in its own namespace, each model one GPU.

The DB-level stories (limits, reclaim marks, the API and the pages) are tests/scheduler/test_quotas.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from accounts.models import NamespaceGrant, Team
from clusters.sync.work_queue import object_key
from models_app.controller import ready_replicas
from models_app.models import LAST_REQUEST_ANNOTATION, InferenceModel, KubeAIModel
from scheduler.models import MemoryReservation, NodePool, TeamQuota
from scheduler.refresh import refresh_node_pools
from tests.clusters.conftest import sample_manifest, wait_for
from tests.support.clusters import KubeCluster, reconcile_row

GI = 1024**3
POOL = "gpu-a100"


def model(name: str, cooldown: str = "1h", last_request: str | None = None, gpus: int = 1) -> dict:
    """``gpus`` GPUs and 16Gi in the pool; ``last_request``: when it was last called (the wake annotation)."""
    manifest = sample_manifest("inferencemodel-llama-2-7b.yaml")
    manifest["metadata"]["name"] = manifest["spec"]["modelName"] = name
    manifest["spec"]["cooldownPeriod"] = cooldown
    manifest["spec"]["resources"]["requests"]["gpu"] = manifest["spec"]["resources"]["limits"]["gpu"] = str(gpus)
    if last_request:
        manifest["metadata"]["annotations"] = {LAST_REQUEST_ANNOTATION: last_request}
    return manifest


def replicas(kube: KubeCluster, name: str) -> int:
    deployment = kube.get("apps/v1", "Deployment", name)
    return deployment["spec"]["replicas"] if deployment else 0


@pytest.fixture
def teams(transactional_db, kube, settings) -> Iterator[tuple[KubeCluster, KubeCluster, object]]:
    """Team alpha in the test's namespace, team beta in a second one, one managed Cluster row."""
    yield from two_teams(kube, settings, ["InferenceModel"])


@pytest.fixture
def teams_of_both_kinds(transactional_db, kube, settings) -> Iterator[tuple[KubeCluster, KubeCluster, object]]:
    """:func:`teams` on a cluster where the portal controls InferenceModels and KubeAI Models, whose
    ``a100-test`` profile is one GPU of the pool a replica (KubeAI's shape, ``<profile>:<count>``)."""
    settings.KUBEAI_RESOURCE_PROFILES = {"a100-test": {
        "limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1", "memory": "10Gi"},
        "nodeSelector": {"inference-pool": POOL},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }}  # fmt: skip
    yield from two_teams(kube, settings, ["InferenceModel", "Model"])


def two_teams(kube, settings, kinds: list[str]) -> Iterator[tuple[KubeCluster, KubeCluster, object]]:
    settings.MAX_RECONCILE_RATE = 8
    beta = KubeCluster(kube.api_client, name=kube.name, plane=kube.plane, proxy=kube.proxy)
    try:
        cluster = kube.register(namespaces=[kube.namespace, beta.namespace], managed_kinds=kinds)
        refresh_node_pools(cluster)
        assert NodePool.objects.get(cluster=cluster, name=POOL).gpu_count == 8
        for name, namespace in (("alpha", kube.namespace), ("beta", beta.namespace)):
            team = Team.objects.create(name=name)
            NamespaceGrant.objects.create(team=team, cluster=cluster, namespace=namespace)
        yield kube, beta, cluster
    finally:
        beta.close()


def quota(cluster, team: str, gpus: int, limit: int | None) -> TeamQuota:
    pool = NodePool.objects.get(cluster=cluster, name=POOL)
    return TeamQuota.objects.create(team=Team.objects.get(name=team), pool=pool, guaranteed_bytes=128 * GI,
                                    guaranteed_gpus=gpus, borrowing_limit_gpus=limit)  # fmt: skip


def test_a_guaranteed_share_is_admitted_in_one_reconcile_by_stopping_the_borrowers_idle_models(teams):
    """Beta borrows 3 GPUs of alpha's unused guarantee and fills the pool; two of its models go
    idle, and so does alpha's own older one. Alpha wakes a model within its guarantee: the one
    reconcile of that model stops beta's oldest idle model (a borrower's, not alpha's own older
    idle one, not beta's newer idle one) and starts alpha's."""
    alpha, beta, cluster = teams
    quota(cluster, "alpha", gpus=4, limit=0)
    quota(cluster, "beta", gpus=4, limit=4)
    # idle 2, 5 and 10 minutes after they were created; the busy ones only after an hour
    alpha.write(model("alpha-idle", cooldown="2m"))
    names = ["beta-1", "beta-2", "beta-3", "beta-4", "beta-5"]
    for name in names:
        beta.write(model(name))
    created = beta.write(model("beta-idle-old", cooldown="5m"))
    beta.write(model("beta-idle-new", cooldown="10m"))
    alpha.sync()
    for kube, name in [(alpha, "alpha-idle"), *((beta, n) for n in [*names, "beta-idle-old", "beta-idle-new"])]:
        wait_for(lambda k=kube, n=name: ready_replicas(k.get("apps/v1", "Deployment", n)) == 1, timeout=60,
                 message=f"{name} ready")  # fmt: skip
    alpha.sync()  # the reported replicas mirrored: 8 of 8 GPUs held, beta borrowing 3
    later = parse_datetime(created["metadata"]["creationTimestamp"]) + timedelta(minutes=20)
    alpha.write(model("alpha-wants", last_request="2026-01-01T00:00:00Z"))
    alpha.sync()  # the newcomer is known and asleep (idle since January)
    assert replicas(alpha, "alpha-wants") == 0
    alpha.write(model("alpha-wants", last_request=later.isoformat()))  # woken 20 minutes on

    row = InferenceModel.objects.get(cluster=cluster, name="alpha-wants")
    reconcile_row(row, now=later)  # one reconcile of the woken model, 20 minutes on

    assert replicas(alpha, "alpha-wants") == 1
    assert MemoryReservation.objects.get(name="alpha-wants").gpus == 1
    assert replicas(beta, "beta-idle-old") == 0  # the borrower's oldest idle model
    assert replicas(beta, "beta-idle-new") == 1 and replicas(alpha, "alpha-idle") == 1
    assert all(replicas(beta, name) == 1 for name in names)


def test_fifty_concurrent_wakes_from_two_teams_never_over_admit_the_pool_or_a_quota(teams):
    """25 sleeping models per team wake at once; one reconcile pass (8 at a time, each admission
    under the pool's row lock) admits each team exactly its guarantee plus its borrowing limit
    (alpha 2 + 1, beta 3 + 2): together the pool's 8 GPUs, so neither the pool nor a guarantee
    ever turns a model away, and any race past a quota or the pool would show in the counts."""
    alpha, beta, cluster = teams
    quota(cluster, "alpha", gpus=2, limit=1)
    quota(cluster, "beta", gpus=3, limit=2)
    long_ago = "2026-01-01T00:00:00Z"
    for index in range(25):
        alpha.write(model(f"a-{index}", cooldown="10m", last_request=long_ago))
        beta.write(model(f"b-{index}", cooldown="10m", last_request=long_ago))
    alpha.sync()  # asleep: idle since January, every Deployment at zero
    assert not MemoryReservation.objects.exists()

    now = timezone.now().isoformat()
    for index in range(25):
        alpha.write(model(f"a-{index}", cooldown="10m", last_request=now))
        beta.write(model(f"b-{index}", cooldown="10m", last_request=now))
    alpha.sync()  # one pass: 50 wakes decided 8 at a time

    running = {
        team: sum(replicas(kube, f"{prefix}-{index}") for index in range(25))
        for team, kube, prefix in (("alpha", alpha, "a"), ("beta", beta, "b"))
    }
    reserved = {
        team: sum(MemoryReservation.objects.filter(namespace=kube.namespace).values_list("gpus", flat=True))
        for team, kube in (("alpha", alpha), ("beta", beta))
    }
    assert running == reserved == {"alpha": 3, "beta": 5}, (running, reserved)
    refused = next(f"a-{index}" for index in range(25) if replicas(alpha, f"a-{index}") == 0)
    ready = next(c for c in alpha.read(InferenceModel.kube, refused)["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "OverQuota"
    assert "over its borrowing limit (quota alpha/gpu-a100: guaranteed 128Gi and 2 GPUs" in ready["message"]


def condition(kube: KubeCluster, name: str, type_: str) -> dict | None:
    status = kube.read(InferenceModel.kube, name).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == type_), None)


def admission_state(alpha: KubeCluster, beta: KubeCluster, names: list[str], claimant: str) -> dict:
    """What a preemption decided on and what it did, for a failure's message: alpha's Deployments'
    replicas, reservations (oldest first) and mirrored running replicas; the claimant's Ready."""
    rows = InferenceModel.objects.filter(namespace=alpha.namespace).values_list("name", "running_replicas")
    reserved = MemoryReservation.objects.filter(namespace=alpha.namespace).order_by("created_at")
    return {
        "deployments": {name: replicas(alpha, name) for name in names},
        "reservations": [(r.name, r.created_at.isoformat()) for r in reserved],
        "running_replicas": dict(rows),
        claimant: condition(beta, claimant, "Ready"),
    }


def test_a_guarantee_preempts_the_newest_borrowers_in_one_reconcile_and_never_a_guaranteed_model(teams):
    """Issue 44, item 1: alpha (4 guaranteed GPUs, no borrowing limit) runs 8 busy one-GPU models,
    the whole pool, 4 of them borrowed; each carries a Borrowing condition while it lasts. Beta
    (4 guaranteed, none used) starts a model: its one reconcile preempts alpha's newest admitted
    model (Ready reason Preempted, a Preempted condition and a Warning Event naming team beta)
    and starts beta's. Four of beta's take alpha's four borrowers, newest first; a fifth, beyond
    beta's guarantee, is refused and alpha keeps its 4 guaranteed models."""
    alpha, beta, cluster = teams
    quota(cluster, "alpha", gpus=4, limit=None)
    quota(cluster, "beta", gpus=4, limit=None)
    names = [f"a-{index}" for index in range(8)]
    for name in names:
        alpha.write(model(name))
    alpha.sync()
    for name in names:
        wait_for(lambda n=name: ready_replicas(alpha.get("apps/v1", "Deployment", n)) == 1, timeout=60,
                 message=f"{name} ready")  # fmt: skip
    alpha.sync()  # the replicas mirrored: alpha holds all 8 GPUs, 4 borrowed
    alpha.sync()  # each model's reconcile now sees who borrows
    reservations = MemoryReservation.objects.filter(namespace=alpha.namespace).order_by("-created_at")
    admitted = list(reservations.values_list("name", flat=True))
    assert sorted(admitted) == names
    newest, oldest = admitted[:4], admitted[4:]
    borrowing = {name for name in names if (c := condition(alpha, name, "Borrowing")) and c["status"] == "True"}
    assert borrowing == set(newest), (borrowing, newest)
    assert "team alpha uses" in condition(alpha, newest[0], "Borrowing")["message"]

    for index, victim in enumerate(newest):
        beta.write(model(f"b-{index}"))
        beta.sync()  # the row exists (the pass also reconciles it: one reconcile, refused or not)
        row = InferenceModel.objects.get(cluster=cluster, namespace=beta.namespace, name=f"b-{index}")
        if replicas(beta, f"b-{index}") == 0:
            reconcile_row(row)
        assert replicas(beta, f"b-{index}") == 1
        assert replicas(alpha, victim) == 0, admission_state(alpha, beta, names, f"b-{index}")
        # Ready said Preempted; the victim's own reconcile in the same pass may have moved it on to
        # the refusal of its restart (the pool is full): the Preempted condition keeps who took its place.
        assert condition(alpha, victim, "Ready")["status"] == "False"
        preempted = condition(alpha, victim, "Preempted")
        assert preempted["status"] == "True" and "team beta reclaims its guaranteed share" in preempted["message"]
        assert condition(alpha, victim, "Borrowing")["status"] == "False"
        uid = alpha.read(InferenceModel.kube, victim)["metadata"]["uid"]
        events = alpha.list("v1", "Event")
        assert any(
            e["involvedObject"]["uid"] == uid and e["reason"] == "Preempted" and "team beta" in e["message"]
            for e in events
        ), events
    assert all(replicas(alpha, name) == 1 for name in oldest), admission_state(alpha, beta, names, "b-3")

    beta.write(model("b-beyond"))
    beta.sync()
    row = InferenceModel.objects.get(cluster=cluster, namespace=beta.namespace, name="b-beyond")
    reconcile_row(row)
    assert replicas(beta, "b-beyond") == 0
    assert condition(beta, "b-beyond", "Ready")["reason"] == "InsufficientGPU"
    assert all(replicas(alpha, name) == 1 for name in oldest)
    alpha.sync()  # the preempted models try again: the pool is full, they stay down, nothing flaps
    assert all(replicas(alpha, name) == 0 for name in newest)
    assert all(replicas(beta, f"b-{index}") == 1 for index in range(4))


def alpha_fills_the_pool(teams, manifest, deployment_of) -> None:
    """Both teams guaranteed 4 GPUs, no borrowing limit; alpha starts ``a-old`` then ``a-new``
    (``manifest(name, gpus=4)``), so a-new is the newer admission and runs on borrowed GPUs; both
    ready (their Deployments, ``deployment_of(name)``)."""
    alpha, _, cluster = teams
    quota(cluster, "alpha", gpus=4, limit=None)
    quota(cluster, "beta", gpus=4, limit=None)
    for name in ("a-old", "a-new"):  # one after the other
        alpha.write(manifest(name, gpus=4))
        alpha.sync()
    for name in ("a-old", "a-new"):
        wait_for(lambda n=name: ready_replicas(alpha.get("apps/v1", "Deployment", deployment_of(n))) == 1,
                 timeout=60, message=f"{name} ready")  # fmt: skip


def test_a_victim_reconciled_right_after_its_preemption_does_not_take_back_the_room(teams):
    """Issue 44, item 1: a preempted model's own reconcile, asked for while the preemption held its
    lease (a watch event), runs the moment the preemption ends, before the claimant asks admission
    again. The claimant's room is reserved before its victims stop (Kueue admits, then evicts), so
    that reconcile finds the pool full and the victim stays down; it once found the room free and
    started again with the newest reservation, the claimant then admitted beside it."""
    alpha, beta, _ = teams
    alpha_fills_the_pool(teams, model, lambda name: name)
    beta.write(model("b-0", gpus=4, last_request="2026-01-01T00:00:00Z"))
    alpha.sync()  # alpha holds the pool's 8 GPUs, 4 borrowed (a-new); b-0 is known and asleep
    assert replicas(alpha, "a-new") == 1 and replicas(beta, "b-0") == 0
    victim = InferenceModel.objects.get(namespace=alpha.namespace, name="a-new")
    cache.set(f"{object_key(victim._meta.label, victim.pk)}:dirty", 1, 60)  # its reconcile asked for meanwhile
    woken = beta.write(model("b-0", gpus=4, last_request=timezone.now().isoformat()))
    assert woken["metadata"]["name"] == "b-0"
    reconcile_row(InferenceModel.objects.get(namespace=beta.namespace, name="b-0"))
    assert replicas(beta, "b-0") == 1
    assert replicas(alpha, "a-new") == 0, admission_state(alpha, beta, ["a-old", "a-new"], "b-0")
    assert replicas(alpha, "a-old") == 1
    reserved = set(MemoryReservation.objects.values_list("namespace", "name"))
    assert reserved == {(alpha.namespace, "a-old"), (beta.namespace, "b-0")}, reserved
    assert condition(alpha, "a-new", "Preempted")["status"] == "True"


def kubeai_model(name: str, gpus: int) -> dict:
    """A KubeAI Model of one replica of ``gpus`` GPUs (the ``a100-test`` profile times ``gpus``)."""
    return {
        "apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": name},
        "spec": {"url": "hf://Qwen/Qwen2.5-7B-Instruct", "engine": "VLLM", "features": ["TextGeneration"],
                 "resourceProfile": f"a100-test:{gpus}", "replicas": 1, "minReplicas": 0, "maxReplicas": 1},
    }  # fmt: skip


def kubeai_condition(kube: KubeCluster, name: str, type_: str) -> dict | None:
    status = kube.read(KubeAIModel.kube, name).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == type_), None)


def test_a_guarantee_preempts_a_borrowing_model_of_another_kind(teams_of_both_kinds):
    """Teams meet across kinds: alpha's two KubeAI Models hold the pool's 8 GPUs, the newer one on
    borrowed capacity (``Borrowing``). Beta's InferenceModel, within beta's guarantee, preempts that
    Model (the KubeAI controller stops all its replicas: ``Preempted`` naming team beta) and starts
    in one reconcile; it was refused, as the InferenceModel controller stopped only its own kind."""
    alpha, beta, cluster = teams_of_both_kinds
    alpha_fills_the_pool(teams_of_both_kinds, kubeai_model, lambda name: f"model-{name}")
    alpha.sync()  # the replicas mirrored: alpha holds the pool's 8 GPUs, 4 borrowed (a-new)
    alpha.sync()  # each Model's reconcile now sees who borrows
    assert kubeai_condition(alpha, "a-new", "Borrowing")["status"] == "True", alpha.read(KubeAIModel.kube, "a-new")

    beta.write(model("b-0", gpus=4))
    beta.sync()
    row = InferenceModel.objects.get(cluster=cluster, namespace=beta.namespace, name="b-0")
    if replicas(beta, "b-0") == 0:  # the pass reconciled it before its row's replicas were mirrored
        reconcile_row(row)

    assert replicas(beta, "b-0") == 1, condition(beta, "b-0", "Ready")
    assert replicas(alpha, "model-a-new") == 0 and replicas(alpha, "model-a-old") == 1
    preempted = kubeai_condition(alpha, "a-new", "Preempted")
    assert preempted["status"] == "True" and "team beta reclaims its guaranteed share" in preempted["message"]
    assert kubeai_condition(alpha, "a-new", "Ready")["status"] == "False"
    reconcile_row(KubeAIModel.objects.get(namespace=alpha.namespace, name="a-new"))  # it asks again: the pool is full
    assert replicas(alpha, "model-a-new") == 0
    assert kubeai_condition(alpha, "a-new", "Preempted")["status"] == "True"


def test_a_kubeai_model_within_its_guarantee_preempts_a_borrowing_inference_model(teams_of_both_kinds):
    """The other way round: alpha's two InferenceModels hold the pool, the newer borrowing; beta's
    KubeAI Model, within beta's guarantee, preempts it and starts (it was refused ``InsufficientGPU``:
    the KubeAI controller stopped nothing)."""
    alpha, beta, cluster = teams_of_both_kinds
    alpha_fills_the_pool(teams_of_both_kinds, model, lambda name: name)
    alpha.sync()

    beta.write(kubeai_model("b-0", gpus=4))
    beta.sync()
    row = KubeAIModel.objects.get(cluster=cluster, namespace=beta.namespace, name="b-0")
    if replicas(beta, "model-b-0") == 0:
        reconcile_row(row)

    assert replicas(beta, "model-b-0") == 1, kubeai_condition(beta, "b-0", "Ready")
    assert replicas(alpha, "a-new") == 0 and replicas(alpha, "a-old") == 1
    preempted = condition(alpha, "a-new", "Preempted")
    assert preempted["status"] == "True" and "team beta reclaims its guaranteed share" in preempted["message"]
