"""A model's and a run's page show what they own, read live from the real control plane: the
Deployment, its ReplicaSet and pods (node, readiness), the Job and its pod, the events of all of
them and a pod's log (served by kwok through kube-apiserver); a mirrored ModelService shows what
llm-d made for it; another team gets 404; a cluster that cannot be reached gives a message, not an
error."""

from __future__ import annotations

import pytest
from django.test import Client
from kubernetes.client import AppsV1Api, CoreV1Api

from accounts.models import NamespaceGrant, Team
from clusters.models import Cluster
from devstack.control_plane import POD_LOG_LINES
from models_app.models import InferenceModel, ModelService
from runs_app.controller import job_name
from runs_app.models import InferenceRun
from tests.accounts.conftest import store
from tests.clusters.conftest import sample_manifest, wait_for
from tests.conftest import ALL_KIND_PERMS

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def teams(managed, make_user):
    """A member of the team owning the test's namespace, and a member of a team owning another."""
    _, cluster = managed
    mine, theirs = Team.objects.create(name="mine"), Team.objects.create(name="theirs")
    NamespaceGrant.objects.create(team=mine, cluster=cluster, namespace=managed[0].namespace)
    NamespaceGrant.objects.create(team=theirs, cluster=cluster, namespace="elsewhere")
    member, other = Client(), Client()
    member.force_login(make_user("member", perms=ALL_KIND_PERMS, teams=[mine]))
    other.force_login(make_user("other", perms=ALL_KIND_PERMS, teams=[theirs]))
    return member, other


def pods_running(kube, selector: str, count: int) -> bool:
    pods = kube.list("v1", "Pod", label_selector=selector)
    return len(pods) == count and all(p["status"].get("phase") in ("Running", "Succeeded") for p in pods)


def running_llama(kube, cluster: Cluster) -> InferenceModel:
    """llama-2-7b applied to the managed cluster, once kwok runs every pod of its Deployment."""
    kube.write(sample_manifest("inferencemodel-llama-2-7b.yaml", kube.namespace))
    kube.sync()
    replicas = kube.get("apps/v1", "Deployment", "llama-2-7b")["spec"]["replicas"]
    wait_for(lambda: pods_running(kube, "app.kubernetes.io/name=llama-2-7b", replicas), timeout=30,
             message="kwok to run the Deployment's pods")
    return InferenceModel.objects.get(cluster=cluster, name="llama-2-7b")


def test_a_managed_models_page_lists_its_deployment_replicaset_pods_and_events(managed, teams) -> None:
    kube, cluster = managed
    member, other = teams
    model = running_llama(kube, cluster)
    page = member.get(f"/models/inferencemodels/{model.pk}/").content.decode()
    assert f'hx-get="/live/inferencemodel/{model.pk}/"' in page  # the page loads the live part

    live = member.get(f"/live/inferencemodel/{model.pk}/", **HTMX).content.decode()
    replica_set = kube.list("apps/v1", "ReplicaSet", label_selector="app.kubernetes.io/name=llama-2-7b")[0]
    assert "<td>Deployment</td><td><code>llama-2-7b</code></td>" in live
    assert f"<code>{replica_set['metadata']['name']}</code>" in live and "Deployment/llama-2-7b" in live
    for pod in kube.list("v1", "Pod", label_selector="app.kubernetes.io/name=llama-2-7b"):
        assert f"<code>{pod['metadata']['name']}</code>" in live
        assert f"<td>{pod['spec']['nodeName']}</td>" in live and pod["spec"]["nodeName"].startswith("gpu-a100-")
    assert "<td>1/1</td>" in live and "Running" in live
    assert "ScalingReplicaSet" in live  # the Deployment controller's event on the Deployment
    assert "Scheduled" in live  # the scheduler's event on a pod
    assert member.get(f"/live/inferencemodel/{model.pk}/").status_code == 200  # without JS: a whole page

    assert other.get(f"/live/inferencemodel/{model.pk}/", **HTMX).status_code == 404
    assert other.get(f"/models/inferencemodels/{model.pk}/").status_code == 404


def test_a_runs_page_lists_its_job_and_pod_and_shows_the_pods_log(managed, teams) -> None:
    kube, cluster = managed
    member, other = teams
    kube.write(sample_manifest("inferenceconfig-example-inference-config.yaml", kube.namespace))
    manifest = sample_manifest("inferencerun-iris-run-january.yaml", kube.namespace)
    manifest["spec"]["configRef"]["namespace"] = kube.namespace
    uid = kube.write(manifest)["metadata"]["uid"]
    kube.sync()
    job = job_name("iris-run-january", uid)
    wait_for(lambda: kube.list("v1", "Pod", label_selector=f"job-name={job}"), timeout=30, message="the Job's pod")
    run = InferenceRun.objects.get(cluster=cluster, name="iris-run-january")
    pod = kube.list("v1", "Pod", label_selector=f"job-name={job}")[0]["metadata"]["name"]

    live = member.get(f"/live/inferencerun/{run.pk}/", **HTMX).content.decode()
    assert f"<td>Job</td><td><code>{job}</code></td>" in live and "InferenceRun/iris-run-january" in live
    assert f"<code>{pod}</code>" in live and f"Job/{job}" in live
    assert "SuccessfulCreate" in live  # the Job controller's event

    url = f"/live/inferencerun/{run.pk}/logs/?pod={pod}"
    log = member.get(url + "&follow=1", **HTMX).content.decode()
    assert all(line in log for line in POD_LOG_LINES), log
    assert 'hx-trigger="every 2s"' in log  # following: htmx asks again
    tail = member.get(url + "&tail=1", **HTMX).content.decode()
    assert POD_LOG_LINES[-1] in tail and POD_LOG_LINES[0] not in tail
    assert 'hx-trigger' not in tail
    assert member.get(url).status_code == 200  # without JS: a whole page

    assert other.get(url, **HTMX).status_code == 404
    assert other.get(f"/live/inferencerun/{run.pk}/", **HTMX).status_code == 404
    # a pod of the same namespace that the run does not own: its log is not the run's to show
    CoreV1Api(kube.api_client).create_namespaced_pod(kube.namespace, {
        "metadata": {"name": "not-the-runs"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    assert member.get(f"/live/inferencerun/{run.pk}/logs/?pod=not-the-runs", **HTMX).status_code == 404


def test_an_unreachable_cluster_gives_a_message_not_an_error(make_user, db) -> None:
    cluster = Cluster.objects.create(name="gone", auth_method=Cluster.AuthMethod.TOKEN,
                                     server_url="https://127.0.0.1:9", bearer_token="t", request_timeout_seconds=2)
    manifest = sample_manifest("inferencemodel-llama-2-7b.yaml", "default")
    model = store(cluster, manifest)
    client = Client()
    client.force_login(make_user("someone", perms=ALL_KIND_PERMS))
    response = client.get(f"/live/inferencemodel/{model.pk}/", **HTMX)
    assert response.status_code == 200
    assert "Cluster gone could not be read just now" in response.content.decode()
    response = client.get(f"/live/inferencemodel/{model.pk}/logs/?pod=x", **HTMX)
    assert response.status_code == 200 and "could not be read" in response.content.decode()


def test_a_mirrored_modelservice_shows_what_llm_d_made_for_it(kube, transactional_db, make_user) -> None:
    """Another controller (llm-d) owns the workloads: its decode Deployment carries an owner
    reference to the ModelService, and its serving pods the ``llm-d.ai/model`` label (reference 004)."""
    cluster = kube.register()
    service = kube.write(sample_manifest("modelservice-qwen3-8b.yaml", kube.namespace))
    kube.sync()
    labels = {"llm-d.ai/model": "qwen3-8b", "llm-d.ai/role": "decode"}
    AppsV1Api(kube.api_client).create_namespaced_deployment(kube.namespace, {
        "metadata": {"name": "qwen3-8b-decode", "ownerReferences": [{
            "apiVersion": service["apiVersion"], "kind": "ModelService", "name": "qwen3-8b",
            "uid": service["metadata"]["uid"], "controller": True}]},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": {"containers": [{"name": "vllm", "image": "vllm"}]}}},
    })
    CoreV1Api(kube.api_client).create_namespaced_pod(kube.namespace, {
        "metadata": {"name": "someone-elses"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    wait_for(lambda: pods_running(kube, "llm-d.ai/model=qwen3-8b", 1), timeout=30, message="llm-d's decode pod")
    client = Client()
    client.force_login(make_user("someone", perms=ALL_KIND_PERMS))
    service_row = ModelService.objects.get(cluster=cluster, name="qwen3-8b")
    live = client.get(f"/live/modelservice/{service_row.pk}/", **HTMX).content.decode()
    assert "<td>Deployment</td><td><code>qwen3-8b-decode</code></td>" in live and "ModelService/qwen3-8b" in live
    assert "<td>ReplicaSet</td>" in live and "Running" in live
    assert "someone-elses" not in live
