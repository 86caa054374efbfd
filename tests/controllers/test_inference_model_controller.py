"""The portal as InferenceModel controller (reference 000), on the real control plane: the
Deployment controller and kwok make Deployments ready, the garbage collector removes them."""

from __future__ import annotations

import re
import threading
import time
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from clusters.sync.work_queue import BUSY, object_key
from clusters.validation.quantities import quantity_to_int
from models_app.controller import FINALIZER, ready_replicas
from models_app.models import InferenceModel
from scheduler.models import MemoryReservation, NodePool
from tests.clusters.conftest import RunningWatch, sample_manifest, wait_for
from tests.support.clusters import reconcile_cluster, reconcile_row

KIND = InferenceModel.kube
GIB = 1024**3


def write_model(kube, file_name: str, **spec_changes) -> dict:
    manifest = sample_manifest(file_name)
    manifest["spec"].update(spec_changes)
    return kube.write(manifest)


def deployment(kube, name: str) -> dict | None:
    return kube.get("apps/v1", "Deployment", name)


def cr(kube, name: str) -> dict:
    return kube.read(KIND, name)


def ready(kube, name: str, replicas: int = 1) -> None:
    """Wait until the Deployment controller reports the pods kwok runs as ready, for the current
    generation of the Deployment (as the controller counts them)."""
    wait_for(
        lambda: ready_replicas(deployment(kube, name)) == replicas,
        timeout=30,
        message=f"{name} to have {replicas} ready replicas",
    )


def condition(obj: dict, type_: str) -> dict:
    return next(c for c in obj["status"]["conditions"] if c["type"] == type_)


@pytest.fixture
def pool(managed):
    _, cluster = managed
    return NodePool.objects.create(cluster=cluster, name="gpu-a100", allocatable_bytes=160 * GIB)


def test_deployment_carries_exactly_the_reference_labels_annotations_and_owner(managed, pool) -> None:
    kube, _ = managed
    created = write_model(kube, "inferencemodel-llama-2-7b.yaml")
    kube.sync()
    deploy = deployment(kube, "llama-2-7b")
    assert deploy["metadata"]["labels"] == {
        "app.kubernetes.io/name": "llama-2-7b",
        "app.kubernetes.io/component": "inference-server",
        "inference.eh-ops.io/model": created["spec"]["modelName"],
        "inference.eh-ops.io/managed": "true",
    }
    annotations = deploy["metadata"]["annotations"]
    assert annotations["inference.eh-ops.io/memory"] == "16Gi"
    assert parse_datetime(annotations["inference.eh-ops.io/last-request-time"])
    assert deploy["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "inference.eh-ops.io/v1alpha1",
            "kind": "InferenceModel",
            "name": "llama-2-7b",
            "uid": created["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    pod = deploy["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == created["spec"]["containerImage"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1" and "gpu" not in container["resources"]["limits"]
    assert pod["nodeSelector"] == created["spec"]["nodeSelector"]
    assert deploy["spec"]["replicas"] == 1
    assert FINALIZER in cr(kube, "llama-2-7b")["metadata"]["finalizers"]
    status = cr(kube, "llama-2-7b")["status"]
    assert status["ready"] is False and condition(cr(kube, "llama-2-7b"), "Ready")["reason"] == "Deploying"
    assert status["observedGeneration"] == created["metadata"]["generation"]


def test_status_follows_the_deployment_as_its_controller_reports(managed, pool) -> None:
    kube, _ = managed
    write_model(kube, "inferencemodel-llama-2-7b.yaml")
    kube.sync()
    ready(kube, "llama-2-7b")
    kube.sync()
    model = cr(kube, "llama-2-7b")
    assert model["status"]["ready"] is True and model["status"]["replicas"] == 1
    assert condition(model, "Ready") | {"lastTransitionTime": None} == {
        "type": "Ready",
        "status": "True",
        "reason": "Deployed",
        "message": "Deployment is ready and serving traffic",
        "lastTransitionTime": None,
        "observedGeneration": 1,
    }
    assert condition(model, "Available")["status"] == "True"
    row = InferenceModel.objects.get(name="llama-2-7b")
    assert row.ready is True
    # A rollout that cannot progress: its new pods fit no node, and someone (kubectl patch) gave the
    # Deployment a 1 s progress deadline; the Deployment controller reports ProgressDeadlineExceeded.
    kube.patch("apps/v1", "Deployment", "llama-2-7b", {"spec": {"progressDeadlineSeconds": 1}})
    edited = cr(kube, "llama-2-7b")
    edited["spec"]["nodeSelector"]["accelerator"] = "nvidia-h100"
    kube.write(edited)
    kube.sync()
    wait_for(
        lambda: any(c["reason"] == "ProgressDeadlineExceeded"
                    for c in deployment(kube, "llama-2-7b")["status"].get("conditions") or []),
        timeout=30,
        message="ProgressDeadlineExceeded",
    )
    # A pass reports it once it reads the Deployment with that condition: on a busy machine the
    # first pass after the wait can still read the Deployment as it was (a fresh-clone CI run saw
    # "Deployed"), so pass again until it does.
    wait_for(
        lambda: kube.sync() is not None and condition(cr(kube, "llama-2-7b"), "Ready")["reason"] == "Failed",
        timeout=60,
        message="Ready: Failed after ProgressDeadlineExceeded",
    )
    failed = condition(cr(kube, "llama-2-7b"), "Ready")
    assert failed["message"].startswith('ReplicaSet "llama-2-7b-') and "has timed out progressing" in failed["message"]


def test_labels_are_valid_for_any_model_name(managed, pool) -> None:
    kube, _ = managed
    long_name = "m-" + "x" * 90
    write_model(kube, "inferencemodel-llama-2-7b.yaml", modelName="meta-llama/Llama-2-7b-chat-hf")
    manifest = sample_manifest("inferencemodel-mistral-7b.yaml")
    manifest["metadata"]["name"] = long_name
    manifest["spec"]["modelName"] = "org/" + "y" * 100
    kube.write(manifest)
    kube.sync()
    labels = deployment(kube, "llama-2-7b")["metadata"]["labels"]
    assert labels["inference.eh-ops.io/model"] == "meta-llama-Llama-2-7b-chat-hf"
    env = deployment(kube, "llama-2-7b")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "MODEL_NAME", "value": "meta-llama/Llama-2-7b-chat-hf"} in env
    long_labels = deployment(kube, long_name)["metadata"]["labels"]
    assert all(len(value) <= 63 for value in long_labels.values())
    ready(kube, long_name)


def test_steady_state_sends_no_writes(managed, pool) -> None:
    kube, _ = managed
    write_model(kube, "inferencemodel-llama-2-7b.yaml")
    kube.sync()
    ready(kube, "llama-2-7b")
    kube.sync()
    assert kube.writes_during(lambda: (kube.sync(), kube.sync())) == []


@pytest.mark.parametrize(
    ("theirs", "kept"),
    [
        ({"resources": {"limits": {"ephemeral-storage": "1Gi"}}},
         lambda container: container["resources"]["limits"]["ephemeral-storage"] == "1Gi"),
        ({"env": [{"name": "HF_HOME", "value": "/cache"}]},
         lambda container: {"name": "HF_HOME", "value": "/cache"} in container["env"]),
    ],
    ids=["limit", "env"],
)
def test_a_field_another_manager_added_costs_at_most_one_apply(managed, pool, theirs, kept) -> None:
    """``kubectl patch`` (its own field manager) adds a field to the managed Deployment: the portal
    owns none of it, so server-side apply would never remove it. At most one apply follows, then
    none in later passes (an apply every pass for ever was the defect), and their field stays."""
    kube, _ = managed
    write_model(kube, "inferencemodel-llama-2-7b.yaml")
    kube.sync()
    patch = {"spec": {"template": {"spec": {
        "nodeSelector": {"topology.kubernetes.io/zone": "a"},
        "containers": [{"name": "inference-server", **theirs}],
    }}}}
    kube.dynamic.resources.get(api_version="apps/v1", kind="Deployment").patch(
        name="llama-2-7b", namespace=kube.namespace, body=patch, field_manager="kubectl-patch",
        content_type="application/strategic-merge-patch+json",
    )

    def applies() -> list:
        return [w for w in kube.writes_during(kube.sync) if w.plural == "deployments"]

    assert len(applies()) <= 1
    assert applies() == [] and applies() == []
    pod = deployment(kube, "llama-2-7b")["spec"]["template"]["spec"]
    assert pod["nodeSelector"]["topology.kubernetes.io/zone"] == "a"
    assert kept(pod["containers"][0])


def test_an_edit_of_the_model_reaches_the_deployment_and_drops_removed_keys(managed, pool) -> None:
    kube, _ = managed
    write_model(kube, "inferencemodel-codellama-34b.yaml", dependencies=[])
    kube.sync()
    assert deployment(kube, "codellama-34b")["spec"]["template"]["spec"]["nodeSelector"]["accelerator"]
    edited = cr(kube, "codellama-34b")
    del edited["spec"]["nodeSelector"]["accelerator"]
    edited["spec"]["containerImage"] = "vllm/vllm-openai:v0.6.0"
    kube.write(edited)
    kube.sync()
    template = deployment(kube, "codellama-34b")["spec"]["template"]["spec"]
    assert template["nodeSelector"] == {"inference-pool": "gpu-a100"}
    assert template["containers"][0]["image"] == "vllm/vllm-openai:v0.6.0"


def test_a_deployment_it_does_not_own_is_never_taken_over(managed, pool) -> None:
    kube, _ = managed
    theirs = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llama-2-7b", "namespace": kube.namespace, "labels": {"team": "theirs"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "theirs"}},
            "template": {"metadata": {"labels": {"app": "theirs"}},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        },
    }
    kube.dynamic.resources.get(api_version="apps/v1", kind="Deployment").create(body=theirs, namespace=kube.namespace)
    write_model(kube, "inferencemodel-llama-2-7b.yaml")
    kube.sync()
    after = deployment(kube, "llama-2-7b")
    assert after["metadata"]["labels"] == {"team": "theirs"} and "ownerReferences" not in after["metadata"]
    failed = condition(cr(kube, "llama-2-7b"), "Ready")
    assert failed["reason"] == "Failed" and "is not controlled by this object" in failed["message"]


def test_scale_to_zero_after_cooldown_and_wake_on_request(managed, pool, editor) -> None:
    kube, cluster = managed
    created = write_model(kube, "inferencemodel-llama-2-7b.yaml", cooldownPeriod="15m")
    kube.sync()
    ready(kube, "llama-2-7b")
    start = parse_datetime(created["metadata"]["creationTimestamp"])
    reconcile_cluster(cluster, now=start + timedelta(minutes=14))
    assert deployment(kube, "llama-2-7b")["spec"]["replicas"] == 1
    assert MemoryReservation.objects.filter(name="llama-2-7b").exists()
    reconcile_cluster(cluster, now=start + timedelta(minutes=16))
    assert deployment(kube, "llama-2-7b")["spec"]["replicas"] == 0
    assert condition(cr(kube, "llama-2-7b"), "Ready")["reason"] == "ScaledToZero"
    assert not MemoryReservation.objects.filter(name="llama-2-7b").exists()

    row = InferenceModel.objects.get(name="llama-2-7b")
    response = editor.post(f"/api/inferencemodels/{row.pk}/wake/")
    assert response.status_code == 200, response.json()
    assert deployment(kube, "llama-2-7b")["spec"]["replicas"] == 1
    woken_at = parse_datetime(
        cr(kube, "llama-2-7b")["metadata"]["annotations"]["inference.eh-ops.io/last-request-time"]
    )
    assert abs(woken_at - timezone.now()) < timedelta(minutes=1)


def test_dependencies_start_first(managed, pool, editor) -> None:
    kube, cluster = managed
    # The dependency's pods fit no node at first (no node has this accelerator): it cannot get ready.
    write_model(kube, "inferencemodel-tokenizer-service.yaml", cooldownPeriod="1m",
                nodeSelector={"inference-pool": "gpu-a100", "accelerator": "nvidia-h100"})
    write_model(kube, "inferencemodel-codellama-34b.yaml", cooldownPeriod="1m")
    kube.sync()
    later = timezone.now() + timedelta(hours=1)
    reconcile_cluster(cluster, now=later)  # both idle: scaled to zero
    assert deployment(kube, "tokenizer-service")["spec"]["replicas"] == 0

    response = editor.post(f"/api/inferencemodels/{InferenceModel.objects.get(name='codellama-34b').pk}/wake/")
    if response.status_code == 409:
        # The scheduler may already have said, during the wake's reconcile of the dependency, that its
        # pod fits no node: the wake then answers that, naming the dependency, and stops there.
        assert re.fullmatch(r"tokenizer-service was not started: FailedScheduling: .+", response.json()["detail"])
        kube.sync()  # the model's own reconcile
    else:
        assert response.status_code == 200, response.json()
        assert list(response.json()["woken"]) == ["tokenizer-service", "codellama-34b"]
    assert deployment(kube, "tokenizer-service")["spec"]["replicas"] == 1
    assert deployment(kube, "codellama-34b")["spec"]["replicas"] == 0
    waiting = condition(cr(kube, "codellama-34b"), "Ready")
    assert (waiting["reason"], waiting["message"]) == (
        "Pending",
        "waiting for dependencies to be ready: tokenizer-service",
    )
    fixed = cr(kube, "tokenizer-service")
    fixed["spec"]["nodeSelector"] = {"inference-pool": "gpu-a100"}
    kube.write(fixed)
    kube.sync()
    ready(kube, "tokenizer-service")
    # The controller starts it within a pass or two of its dependency being ready (the Deployment
    # controller may still be finishing the dependency's rollout during the first).
    wait_for(lambda: kube.sync() and deployment(kube, "codellama-34b")["spec"]["replicas"] == 1, timeout=30,
             message="codellama-34b started once its dependency is ready")


def test_a_wake_waits_for_a_reconcile_in_progress_and_answers_from_its_own(managed, pool, editor) -> None:
    """Another reconcile of the model (the periodic pass, a watch event) holds its lease when a wake
    comes: the wake waits for it to end, then reconciles itself and answers with its own outcome,
    not the holder's earlier status (a wake once answered a refusal read from there)."""
    kube, cluster = managed
    write_model(kube, "inferencemodel-llama-2-7b.yaml", cooldownPeriod="1m")
    kube.sync()
    reconcile_cluster(cluster, now=timezone.now() + timedelta(hours=1))  # idle: scaled to zero
    assert deployment(kube, "llama-2-7b")["spec"]["replicas"] == 0
    row = InferenceModel.objects.get(name="llama-2-7b")
    key = object_key(row._meta.label, row.pk)
    assert cache.add(key, "another reconcile", 60)
    holder = threading.Timer(1.0, cache.delete, [key])  # the other reconcile ends a moment after the wake asks
    holder.start()
    try:
        response = editor.post(f"/api/inferencemodels/{row.pk}/wake/")
    finally:
        holder.join()
    assert response.status_code == 200, response.json()
    assert response.json()["woken"]["llama-2-7b"] != BUSY, response.json()
    assert deployment(kube, "llama-2-7b")["spec"]["replicas"] == 1  # started by the wake's own reconcile


def test_missing_or_cyclic_dependencies_are_refused_naming_them(managed, pool, editor) -> None:
    kube, _ = managed
    write_model(kube, "inferencemodel-codellama-34b.yaml", dependencies=["ghost-model"])
    kube.sync()
    assert (
        "dependency ghost-model of codellama-34b does not exist"
        in condition(cr(kube, "codellama-34b"), "Ready")["message"]
    )
    row = InferenceModel.objects.get(name="codellama-34b")
    refused = editor.post(f"/api/inferencemodels/{row.pk}/wake/")
    assert refused.status_code == 400 and "ghost-model" in refused.json()["detail"]

    write_model(kube, "inferencemodel-tokenizer-service.yaml", dependencies=["codellama-34b"])
    write_model(kube, "inferencemodel-codellama-34b.yaml", dependencies=["tokenizer-service"])
    kube.sync()
    cycle = condition(cr(kube, "codellama-34b"), "Ready")
    assert (
        cycle["reason"] == "Failed"
        and "dependency cycle: codellama-34b -> tokenizer-service -> codellama-34b" in cycle["message"]
    )
    assert "cycle" in editor.post(f"/api/inferencemodels/{row.pk}/wake/").json()["detail"]


def test_budget_denial_names_requested_available_and_holders(managed) -> None:
    kube, cluster = managed
    NodePool.objects.create(cluster=cluster, name="gpu-a100", allocatable_bytes=60 * GIB)
    write_model(kube, "inferencemodel-llama-2-7b.yaml")
    kube.sync()
    write_model(kube, "inferencemodel-codellama-34b.yaml", dependencies=[])
    kube.sync()
    denied = condition(cr(kube, "codellama-34b"), "Ready")
    assert denied["reason"] == "InsufficientMemory"
    assert "requested 48Gi, available 44Gi of 60Gi" in denied["message"]
    # "starting" while its Deployment is not ready yet; kwok may have made it ready already.
    assert re.search(rf"held by {kube.namespace}/llama-2-7b \(16Gi(, starting)?\)", denied["message"])
    assert deployment(kube, "codellama-34b")["spec"]["replicas"] == 0
    assert condition(cr(kube, "llama-2-7b"), "Ready")["reason"] in ("Deploying", "Deployed")  # unaffected


def test_finalizer_releases_budget_cleans_metrics_and_lets_the_object_go(managed, pool, metrics_client) -> None:
    kube, _ = managed
    write_model(kube, "inferencemodel-llama-2-7b.yaml")
    kube.sync()
    assert MemoryReservation.objects.filter(name="llama-2-7b").exists()
    replicas = 'inference_portal_model_replicas{cluster="managed",name="llama-2-7b"'
    assert replicas in metrics_client.get("/metrics").content.decode()
    kube.remove(KIND, "llama-2-7b")
    assert cr(kube, "llama-2-7b")["metadata"]["deletionTimestamp"]
    kube.sync()
    assert cr(kube, "llama-2-7b") is None
    wait_for(lambda: deployment(kube, "llama-2-7b") is None, timeout=30, message="garbage collection")
    assert not MemoryReservation.objects.filter(name="llama-2-7b").exists()
    assert f'name="llama-2-7b",namespace="{kube.namespace}"' not in metrics_client.get("/metrics").content.decode()
    assert quantity_to_int("16Gi") == 16 * GIB


def test_mirror_mode_never_acts(managed, pool) -> None:
    kube, cluster = managed
    cluster.managed_kinds = []
    cluster.save()
    write_model(kube, "inferencemodel-llama-2-7b.yaml")
    out = kube.sync()
    assert "reconcile" not in out
    assert deployment(kube, "llama-2-7b") is None
    assert "finalizers" not in cr(kube, "llama-2-7b")["metadata"]


def test_watch_events_trigger_reconciles(managed, pool) -> None:
    kube, cluster = managed
    watch = RunningWatch(cluster).start()
    try:
        wait_for(watch.ready, message="watchers ready")
        write_model(kube, "inferencemodel-mistral-7b.yaml", containerImage="vllm/vllm-openai:v0.6.0")
        wait_for(lambda: deployment(kube, "mistral-7b") is not None, message="a Deployment from the watch event")
        # kwok runs the pod and the Deployment controller reports it: only the Deployment's events
        # reach the portal, and its watcher reconciles the owner.
        wait_for(lambda: (cr(kube, "mistral-7b").get("status") or {}).get("ready") is True, timeout=30,
                 message="Deployed")
    finally:
        watch.stop()


def test_mode_is_set_per_cluster_and_kind(api_as, transactional_db) -> None:
    staff = api_as(perms=["clusters.add_cluster"])
    created = staff.post(
        "/api/clusters/",
        {"name": "ctl", "server_url": "https://127.0.0.1:6443", "managed_kinds": ["InferenceModel"]},
        format="json",
    )
    assert created.status_code == 201 and created.json()["managed_kinds"] == ["InferenceModel"]
    refused = staff.post(
        "/api/clusters/",
        {"name": "bad", "server_url": "https://127.0.0.1:6443", "managed_kinds": ["ModelService"]},
        format="json",
    )
    assert refused.status_code == 400
    assert "must list only kinds the portal can control: InferenceModel, InferenceRun" in str(refused.json())


def test_add_cluster_manage_option(transactional_db) -> None:
    import io

    from django.core.management import call_command

    from clusters.models import Cluster

    out = io.StringIO()
    call_command(
        "add_cluster",
        "ctl",
        "--server",
        "https://127.0.0.1:6443",
        "--manage",
        "InferenceModel,InferenceRun",
        stdout=out,
    )
    assert "manages InferenceModel, InferenceRun" in out.getvalue()
    assert Cluster.objects.get(name="ctl").manages("InferenceRun")
    with pytest.raises(Exception, match="managed_kinds"):
        call_command(
            "add_cluster", "bad", "--server", "https://127.0.0.1:6443", "--manage", "KubeAIModel", stdout=io.StringIO()
        )


def _running(kube, file_name: str, **spec) -> dict:
    created = write_model(kube, file_name, **spec)
    kube.sync()
    name = created["metadata"]["name"]
    ready(kube, name)
    kube.sync()
    assert deployment(kube, name)["spec"]["replicas"] == 1
    return created


def test_a_dependency_going_down_never_stops_a_running_model(managed, pool) -> None:
    kube, cluster = managed
    _running(kube, "inferencemodel-tokenizer-service.yaml", cooldownPeriod="1m")
    _running(kube, "inferencemodel-codellama-34b.yaml", cooldownPeriod="2h")
    reconcile_cluster(cluster, now=timezone.now() + timedelta(minutes=5))  # only the dependency is idle
    assert deployment(kube, "tokenizer-service")["spec"]["replicas"] == 0
    assert deployment(kube, "codellama-34b")["spec"]["replicas"] == 1


def test_a_running_model_is_not_evicted_when_its_pool_shrinks(managed, pool) -> None:
    kube, _ = managed
    _running(kube, "inferencemodel-llama-2-7b.yaml")
    NodePool.objects.filter(pk=pool.pk).update(budget_bytes=1 * GIB)  # staff shrink the budget below 16Gi
    kube.sync()
    assert deployment(kube, "llama-2-7b")["spec"]["replicas"] == 1
    assert condition(cr(kube, "llama-2-7b"), "Ready")["reason"] == "Deployed"


def test_budget_held_by_a_model_that_left_without_its_finalizer_is_released(managed, pool) -> None:
    kube, _ = managed
    _running(kube, "inferencemodel-llama-2-7b.yaml")
    assert MemoryReservation.objects.filter(name="llama-2-7b").exists()
    kube.patch(KIND.api_version, KIND.kind, "llama-2-7b", {"metadata": {"finalizers": None}})  # removed by hand
    kube.remove(KIND, "llama-2-7b")
    kube.sync()  # the resync marks the row DeletedInCluster; the pass sweeps what it held
    assert InferenceModel.objects.get(name="llama-2-7b").sync_state == "DeletedInCluster"
    assert not MemoryReservation.objects.filter(name="llama-2-7b").exists()


def test_the_newest_request_time_wins_wherever_it_was_stamped(managed, pool) -> None:
    kube, cluster = managed
    created = _running(kube, "inferencemodel-llama-2-7b.yaml", cooldownPeriod="15m")
    start = parse_datetime(created["metadata"]["creationTimestamp"])
    stamped = (start + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    # A request path stamps the Deployment, not the model.
    kube.patch("apps/v1", "Deployment", "llama-2-7b",
               {"metadata": {"annotations": {"inference.eh-ops.io/last-request-time": stamped}}})
    kube.informed("apps/v1", "Deployment", "llama-2-7b")  # the pass reads it through the informer
    reconcile_cluster(cluster, now=start + timedelta(minutes=16))
    after = deployment(kube, "llama-2-7b")
    assert after["spec"]["replicas"] == 1  # 6 minutes since the last request: within the cooldown
    kept = parse_datetime(after["metadata"]["annotations"]["inference.eh-ops.io/last-request-time"])
    assert kept == parse_datetime(stamped)  # never replaced by the older creation time
    reconcile_cluster(cluster, now=start + timedelta(minutes=26))
    assert deployment(kube, "llama-2-7b")["spec"]["replicas"] == 0


def test_every_request_stays_within_the_clusters_namespaces(managed, pool) -> None:
    """A cluster row limited to namespaces is what a namespace-scoped Role allows: the watchers of
    owned Deployments and Jobs, like everything else, ask for those namespaces only."""
    kube, cluster = managed
    seen = len(kube.proxy.requests_seen)
    watch = RunningWatch(cluster).start()
    try:
        wait_for(watch.ready, message="watchers ready")
        write_model(kube, "inferencemodel-mistral-7b.yaml")
        wait_for(lambda: (cr(kube, "mistral-7b").get("status") or {}).get("ready") is True, timeout=30,
                 message="Deployed")
    finally:
        watch.stop()
    requests = kube.proxy.requests_seen[seen:]
    assert {r.plural for r in requests} >= {"deployments", "jobs", "inferencemodels"}
    assert [r for r in requests if r.namespace != kube.namespace] == []


@pytest.mark.parametrize("how", ["switch to mirror", "remove the cluster"])
def test_the_finalizer_comes_off_when_the_portal_stops_managing(managed, pool, how: str) -> None:
    kube, cluster = managed
    write_model(kube, "inferencemodel-llama-2-7b.yaml")
    kube.sync()
    assert FINALIZER in cr(kube, "llama-2-7b")["metadata"]["finalizers"]
    if how == "switch to mirror":
        cluster.managed_kinds = ["InferenceRun"]
        cluster.save()
    else:
        cluster.delete()
    assert FINALIZER not in (cr(kube, "llama-2-7b")["metadata"].get("finalizers") or [])
    kube.remove(KIND, "llama-2-7b")
    wait_for(lambda: cr(kube, "llama-2-7b") is None, message="the delete to go through, not hang")


def test_one_reconcile_per_object_at_a_time_and_none_lost(managed, pool) -> None:
    import threading

    from django.db import connection

    from clusters.sync.work_queue import BUSY

    kube, _ = managed
    write_model(kube, "inferencemodel-llama-2-7b.yaml")
    kube.sync()
    kube.proxy.stall("get", "inferencemodels", seconds=1.0, times=1)  # the first reconcile is slow
    seen = len(kube.proxy.requests_seen)
    outcomes: list[str] = []

    def first() -> None:
        try:
            outcomes.append(reconcile_row(InferenceModel.objects.select_related("cluster").get(name="llama-2-7b")))
        finally:
            connection.close()

    thread = threading.Thread(target=first)
    thread.start()
    time.sleep(0.3)
    second = reconcile_row(InferenceModel.objects.select_related("cluster").get(name="llama-2-7b"))
    thread.join(timeout=30)
    assert second == BUSY and outcomes and outcomes[0] != BUSY
    reads = [r for r in kube.proxy.requests_seen[seen:] if r.verb == "get" and r.plural == "inferencemodels"]
    assert len(reads) == 2  # not concurrently, and not lost: the holder ran once more for it
