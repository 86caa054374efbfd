"""A reconcile pass reads what it listed (issue 44, items 7 and 10): one list of the managed kind per
namespace, and the Deployments it owns from the process's informer (a watch), not a GET of every
model and two of its Deployment, nor a list of Deployments per pass. Counted at the fault proxy the
portal reaches the real control plane through; a change made between passes is acted on by the
next pass."""

from __future__ import annotations

from collections import Counter

import pytest

from clusters.kube.informers import informer
from clusters.models import Cluster
from models_app.models import InferenceModel
from runs_app.models import InferenceRun
from tests.clusters.conftest import sample_manifest, wait_for
from tests.controllers.test_inference_run_controller import write_config, write_run
from tests.support.clusters import reconcile_cluster

MODELS = 3


def cpu_model(index: int, namespace: str) -> dict:
    manifest = sample_manifest("inferencemodel-llama-2-7b.yaml", namespace)
    name = f"steady-{index}"
    manifest["metadata"]["name"] = name
    manifest["spec"].update(modelName=name, memory="1Gi", cooldownPeriod="24h", nodeSelector={},
                            backendUrl=f"http://{name}.{namespace}.svc:8000")  # fmt: skip
    manifest["spec"]["resources"] = {"requests": {"cpu": "10m"}, "limits": {"cpu": "10m"}}
    return manifest


def test_a_pass_lists_once_and_reads_no_object_on_its_own(managed) -> None:
    kube, cluster = managed
    if kube.proxy is None:
        pytest.skip("counts requests at the session's fault proxy")
    for index in range(MODELS):
        kube.write(cpu_model(index, kube.namespace))

    def all_ready() -> bool:
        kube.sync()
        deployments = kube.list("apps/v1", "Deployment")
        return len(deployments) == MODELS and all((d.get("status") or {}).get("readyReplicas") for d in deployments)

    wait_for(all_ready, timeout=60, message="every model's Deployment ready")
    kube.sync()  # statuses caught up
    cluster = Cluster.objects.get(pk=cluster.pk)
    seen = len(kube.proxy.requests_seen)
    reconcile_cluster(cluster)
    requests = Counter((r.verb, r.plural) for r in kube.proxy.requests_seen[seen:])
    assert requests == {("list", "inferencemodels"): 1}, requests  # the Deployments: the informer's

    # another writer scales a Deployment by hand: the informer's watch brings it, and the pass
    # puts the model's replicas back with no read of its own
    kube.patch("apps/v1", "Deployment", "steady-1", {"spec": {"replicas": 2}})
    shared = informer(cluster, "apps/v1", "Deployment", kube.namespace, "inference.eh-ops.io/managed=true")
    wait_for(lambda: any(d["metadata"]["name"] == "steady-1" and d["spec"]["replicas"] == 2 for d in shared.items()),
             timeout=30, message="the informer to see the hand-made change")
    seen = len(kube.proxy.requests_seen)
    reconcile_cluster(cluster)
    assert kube.get("apps/v1", "Deployment", "steady-1")["spec"]["replicas"] == 1
    requests = Counter((r.verb, r.plural) for r in kube.proxy.requests_seen[seen:])
    assert requests[("patch", "deployments")] == 1 and not requests[("list", "deployments")], requests
    assert not requests[("get", "deployments")], requests

    # another writer scales one down between passes: the next pass lists it and acts
    kube.patch("inference.eh-ops.io/v1alpha1", "InferenceModel", "steady-0", {"spec": {"maxReplicas": 0}})
    reconcile_cluster(cluster)
    assert kube.get("apps/v1", "Deployment", "steady-0")["spec"]["replicas"] == 0
    status = kube.read(InferenceModel.kube, "steady-0")["status"]
    assert next(c for c in status["conditions"] if c["type"] == "Ready")["reason"] == "ScaledToZero"


def test_finished_runs_cost_a_pass_one_list_of_runs_and_one_of_configs(managed) -> None:
    """A finished run's reconcile reads its InferenceConfig (its autoDeletePolicy): from the pass's
    list of configs (``controller_reads``), not a GET per run per pass."""
    kube, cluster = managed
    if kube.proxy is None:
        pytest.skip("counts requests at the session's fault proxy")
    write_config(kube)
    names = [write_run(kube, name=f"done-{index}")["metadata"]["name"] for index in range(MODELS)]

    def all_finished() -> bool:
        kube.sync()
        return all((kube.read(InferenceRun.kube, name).get("status") or {}).get("phase") == "Succeeded"
                   for name in names)  # fmt: skip

    wait_for(all_finished, timeout=90, message="every run to succeed")
    kube.sync()
    cluster = Cluster.objects.get(pk=cluster.pk)
    seen = len(kube.proxy.requests_seen)
    reconcile_cluster(cluster)
    requests = Counter((r.verb, r.plural) for r in kube.proxy.requests_seen[seen:])
    assert requests == {("list", "inferenceruns"): 1, ("list", "inferenceconfigs"): 1}, requests
