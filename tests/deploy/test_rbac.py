"""The ClusterRole of platform/deploy is enough for everything the portal does, and nothing more:
under its ServiceAccount's own token (from the TokenRequest API) the sync, the watcher, applies
from the portal, the node-pool refresh, both controllers and the pages' live view (pods, events, logs)
work on the real control plane, while
reading Secrets is refused. The ``update`` on ``inferencemodels/finalizers`` is needed: without it
the API server refuses the Deployment whose owner reference sets ``blockOwnerDeletion``."""

from __future__ import annotations

import copy

import kubernetes
import pytest

from clusters.gateway import ClusterGateway
from clusters.leader import LeaseElector, lease_namespace
from clusters.live import live_objects, pod_log
from clusters.models import Cluster, SyncStat
from devstack.control_plane import NODE_POOLS, POD_LOG_LINES
from models_app.models import InferenceModel
from runs_app.controller import job_name
from runs_app.models import InferenceRun
from scheduler.refresh import refresh_node_pools
from tests.clusters.conftest import RunningWatch, sample_manifest, wait_for
from tests.conftest import ENDPOINTS
from tests.deploy.conftest import apply, find

PORTAL = "inference-portal"
FINALIZERS_RULE = {"apiGroups": ["inference.eh-ops.io"], "resources": ["inferencemodels/finalizers"],
                   "verbs": ["update"]}  # fmt: skip


def service_account_token(admin_client, role: dict, account: str) -> str:
    """Apply the namespace, a ServiceAccount named ``account``, ``role`` and their binding for real,
    then ask the TokenRequest API for the account's token (as a pod's projected token is made)."""
    namespace = find("Namespace")["metadata"]["name"]
    apply(admin_client, find("Namespace"))
    service_account = copy.deepcopy(find("ServiceAccount"))
    service_account["metadata"]["name"] = account
    binding = copy.deepcopy(find("ClusterRoleBinding"))
    binding["metadata"]["name"] = role["metadata"]["name"]
    binding["roleRef"]["name"] = role["metadata"]["name"]
    binding["subjects"][0]["name"] = account
    for document in (service_account, role, binding):
        apply(admin_client, document)
    request = kubernetes.client.CoreV1Api(admin_client).create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": 3600}}
    )
    return request.status.token


def register(kube, control_plane, token: str) -> Cluster:
    """The Cluster row as `add_cluster --server --token --ca-file` makes it, straight to kube-apiserver."""
    kube.name = "portal-sa"
    return Cluster.objects.create(
        name=kube.name, auth_method=Cluster.AuthMethod.TOKEN, server_url=control_plane.url, bearer_token=token,
        ca_cert=control_plane.ca_pem, namespaces=[kube.namespace], managed_kinds=["InferenceModel", "InferenceRun"],
    )  # fmt: skip


def write_model(kube) -> dict:
    return kube.write(sample_manifest("inferencemodel-llama-2-7b.yaml", kube.namespace))


def write_run(kube, name: str, **spec) -> dict:
    manifest = sample_manifest("inferencerun-iris-run-january.yaml", kube.namespace)
    manifest["metadata"]["name"] = name
    manifest["spec"]["configRef"]["namespace"] = kube.namespace
    manifest["spec"].update(spec)
    return kube.write(manifest)


def job_finished(kube, name: str) -> bool:
    conditions = ((kube.get("batch/v1", "Job", name) or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conditions)


def test_everything_the_portal_does_works_under_its_own_service_account(
    kube, control_plane, admin_client, transactional_db, editor
) -> None:
    cluster = register(kube, control_plane, service_account_token(admin_client, find("ClusterRole"), PORTAL))
    assert refresh_node_pools(cluster).pools == len(NODE_POOLS)  # Nodes: list
    model = write_model(kube)
    config = sample_manifest("inferenceconfig-example-inference-config.yaml", kube.namespace)
    config["spec"]["autoDeletePolicy"] = "DeleteOnCompletion"
    kube.write(config)
    run = write_run(kube, "once")
    write_run(kube, "nightly", schedule="0 3 * * *")

    out = kube.sync()  # list every kind, then reconcile: finalizer, status, Deployment, ConfigMap, Job, CronJob
    assert "error" not in out, out
    assert SyncStat.objects.filter(cluster=cluster, kind="InferenceRun", counter=SyncStat.Counter.RECONCILES).exists()
    deployment = kube.get("apps/v1", "Deployment", "llama-2-7b")
    assert deployment["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] is True
    assert kube.read(InferenceModel.kube, "llama-2-7b")["status"]["conditions"]
    once = job_name("once", run["metadata"]["uid"])
    assert kube.get("v1", "ConfigMap", f"{once}-contract") and kube.list("batch/v1", "CronJob")
    wait_for(lambda: job_finished(kube, once), timeout=30, message="the runner Job to finish")
    run_row = InferenceRun.objects.get(cluster=cluster, name="once")
    live = live_objects(run_row)  # the live view: workloads, pods, events; then a pod's log
    assert not live.error and [w.name for w in live.workloads] == [once] and live.pods, live.error
    assert pod_log(run_row, live.pods[0].name, "", 5) == ("\n".join(POD_LOG_LINES) + "\n", "")
    kube.sync()
    out = kube.sync()  # the finished run: autoDeletePolicy deletes its Job and contract
    assert "error" not in out, out
    assert kube.get("batch/v1", "Job", once) is None and kube.get("v1", "ConfigMap", f"{once}-contract") is None

    watch = RunningWatch(cluster).start()  # watches the kinds, Deployments and Jobs in the namespace
    try:
        wait_for(watch.ready, message="every watch to list and start watching under the service account")
        kube.patch("inference.eh-ops.io/v1alpha1", "InferenceModel", "llama-2-7b", {"metadata": {"labels": {"a": "b"}}})
        wait_for(lambda: InferenceModel.objects.get(cluster=cluster, name="llama-2-7b").labels.get("a") == "b",
                 message="the watched change")  # fmt: skip
    finally:
        watch.stop()
    # every watch (Deployments and Jobs included) ran without a refusal: no reconnect after an error
    assert not SyncStat.objects.filter(cluster=cluster, counter=SyncStat.Counter.WATCH_RECONNECTS).exists()

    url = f"{ENDPOINTS['InferenceModel']}?cluster={cluster.name}"
    manifest = sample_manifest("inferencemodel-mistral-7b.yaml", kube.namespace)
    assert editor.post(url, manifest, format="json").status_code == 201  # create, applied at once (eager)
    row = InferenceModel.objects.get(cluster=cluster, name="mistral-7b")
    assert row.sync_state == "Synced", row.last_error
    response = editor.patch(f"{ENDPOINTS['InferenceModel']}{row.pk}/", {"spec": {"memory": "15Gi"}}, format="json")
    assert response.status_code == 200
    assert kube.read(InferenceModel.kube, "mistral-7b")["spec"]["memory"] == "15Gi"  # merge patch
    assert editor.delete(f"{ENDPOINTS['InferenceModel']}{row.pk}/").status_code in (202, 204)
    assert model["metadata"]["uid"] != (kube.read(InferenceModel.kube, "mistral-7b") or {}).get("metadata", {}).get(
        "uid"
    )

    gateway = ClusterGateway(cluster)
    try:
        elector = LeaseElector(gateway, lease_namespace(cluster.namespaces), "rbac-check")
        assert elector.try_acquire_or_renew() and elector.try_acquire_or_renew()  # the watcher's Lease: create, update
        elector.release()
        with pytest.raises(kubernetes.client.ApiException) as refused:
            gateway.core.list_namespaced_secret(kube.namespace)
        assert refused.value.status == 403
        with pytest.raises(kubernetes.client.ApiException) as refused:
            gateway.core.create_namespaced_pod(kube.namespace, {"metadata": {"name": "x"}, "spec": {
                "containers": [{"name": "x", "image": "x"}]}})  # fmt: skip
        assert refused.value.status == 403
    finally:
        gateway.close()


def test_without_update_on_inferencemodels_finalizers_the_owned_deployment_is_refused(
    kube, control_plane, admin_client, transactional_db
) -> None:
    role = copy.deepcopy(find("ClusterRole"))
    assert FINALIZERS_RULE in role["rules"]
    role["rules"].remove(FINALIZERS_RULE)
    role["metadata"]["name"] = f"{PORTAL}-without-finalizers"
    cluster = register(kube, control_plane, service_account_token(admin_client, role, role["metadata"]["name"]))
    refresh_node_pools(cluster)
    write_model(kube)

    out = kube.sync()
    assert "reconcile InferenceModel" in out and "Forbidden" in out and "blockOwnerDeletion" in out, out
    assert kube.get("apps/v1", "Deployment", "llama-2-7b") is None
    conditions = kube.read(InferenceModel.kube, "llama-2-7b")["status"]["conditions"]
    ready = next(c for c in conditions if c["type"] == "Ready")
    assert ready["reason"] == "Forbidden" and "blockOwnerDeletion" in ready["message"]  # on the model, not only here
