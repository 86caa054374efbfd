"""A reconcile pass reads what it listed (issue 44, item 10): one list of the managed kind and one of
the Deployments it owns per namespace, not a GET of every model and two of its Deployment. Counted
at the fault proxy the portal reaches the real control plane through; a change made between passes
is acted on by the next pass."""

from __future__ import annotations

from collections import Counter

import pytest

from clusters.models import Cluster
from clusters.sync.controllers import reconcile_cluster
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest, wait_for

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
    assert requests == {("list", "inferencemodels"): 1, ("list", "deployments"): 1}, requests

    # another writer scales one down between passes: the next pass lists it and acts
    kube.patch("inference.eh-ops.io/v1alpha1", "InferenceModel", "steady-0", {"spec": {"maxReplicas": 0}})
    reconcile_cluster(cluster)
    assert kube.get("apps/v1", "Deployment", "steady-0")["spec"]["replicas"] == 0
    status = kube.read(InferenceModel.kube, "steady-0")["status"]
    assert next(c for c in status["conditions"] if c["type"] == "Ready")["reason"] == "ScaledToZero"
