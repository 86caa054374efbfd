"""The RBAC of platform/deploy is enough for everything the portal does, and nothing more:
under its ServiceAccount's own token (from the TokenRequest API), with the managed-namespace Role
in the test's namespace only, the sync, the watcher, applies from the portal, the node-pool refresh,
both controllers and the pages' live view (pods, events, logs) work on the real control plane;
outside that namespace every write, Job, CronJob (and with them any mount of a Secret), pod log
and Lease is refused, as are Secrets and other Leases inside it. The ``update`` on
``inferencemodels/finalizers`` is needed: without it the API server refuses the Deployment whose
owner reference sets ``blockOwnerDeletion``. Inside the managed namespace the pod-template admission
policy refuses, under the same token, every Job, CronJob or Deployment that would reach what RBAC
keeps from it: a Secret (volume or environment), another ServiceAccount (one bound to ``admin``), the
node (host namespaces, hostPath, privilege); the namespace enforces the baseline Pod Security
Standard."""

from __future__ import annotations

import kubernetes
import pytest

from clusters.kube.client import ClusterGateway
from clusters.kube.live import live_objects, pod_log
from clusters.models import Cluster, SyncStat
from clusters.sync.leader import LeaseElector, lease_namespace
from devstack.control_plane import NODE_POOLS, POD_LOG_LINES
from models_app.models import InferenceModel
from runs_app.controller import job_name
from runs_app.models import InferenceRun
from scheduler.refresh import refresh_node_pools
from tests.clusters.conftest import RunningWatch, sample_manifest, wait_for
from tests.conftest import ENDPOINTS
from tests.deploy.conftest import LEASE_NAME, find, managed_namespace, rendered, service_account_token

PORTAL = "inference-portal"
FINALIZERS_RULE = {"apiGroups": ["inference.eh-ops.io"], "resources": ["inferencemodels/finalizers"],
                   "verbs": ["update"]}  # fmt: skip
READ_VERBS = {"get", "list", "watch"}
OTHER_CONTROLLERS_LEASES = ("kube-controller-manager", "kube-scheduler")


def deploy_rbac(managed: str) -> list[dict]:
    """The base's ServiceAccount and cluster-wide reads, and the Role of one managed namespace."""
    return [d for d in rendered() if d["kind"] != "Namespace"] + managed_namespace(managed)


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
    cluster = register(kube, control_plane, service_account_token(admin_client, deploy_rbac(kube.namespace), PORTAL))
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
    documents = deploy_rbac(kube.namespace)
    role = next(d for d in documents if d["kind"] == "Role")
    assert FINALIZERS_RULE in role["rules"]
    role["rules"].remove(FINALIZERS_RULE)
    cluster = register(kube, control_plane, service_account_token(admin_client, documents, f"{PORTAL}-no-finalizers"))
    refresh_node_pools(cluster)
    write_model(kube)

    out = kube.sync()
    assert "reconcile InferenceModel" in out and "Forbidden" in out and "blockOwnerDeletion" in out, out
    assert kube.get("apps/v1", "Deployment", "llama-2-7b") is None
    conditions = kube.read(InferenceModel.kube, "llama-2-7b")["status"]["conditions"]
    ready = next(c for c in conditions if c["type"] == "Ready")
    assert ready["reason"] == "Forbidden" and "blockOwnerDeletion" in ready["message"]  # on the model, not only here


def refused(call, *args, **kwargs) -> None:
    """The call is answered 403 Forbidden (RBAC decides before the object is even looked up)."""
    with pytest.raises(kubernetes.client.ApiException) as refusal:
        call(*args, **kwargs)
    assert refusal.value.status == 403, refusal.value.body


def test_nothing_outside_the_managed_namespaces_and_no_other_lease(kube, control_plane, admin_client) -> None:
    token = service_account_token(admin_client, deploy_rbac(kube.namespace), f"{PORTAL}-refusals")
    admin_core = kubernetes.client.CoreV1Api(admin_client)
    admin_leases = kubernetes.client.CoordinationV1Api(admin_client)
    unmanaged = f"{kube.namespace}-other"
    admin_core.create_namespace({"metadata": {"name": unmanaged}})
    try:
        # what a real cluster holds: a pod elsewhere, and the control plane's leader-election Leases
        admin_core.create_namespaced_pod(unmanaged, {"metadata": {"name": "app"}, "spec": {
            "containers": [{"name": "app", "image": "app"}]}})  # fmt: skip
        for name in OTHER_CONTROLLERS_LEASES:
            if not admin_leases.list_namespaced_lease("kube-system", field_selector=f"metadata.name={name}").items:
                admin_leases.create_namespaced_lease("kube-system", {"metadata": {"name": name}, "spec": {}})
        configuration = kubernetes.client.Configuration()
        configuration.host, configuration.ssl_ca_cert = control_plane.url, str(control_plane.workdir / "ca.crt")
        configuration.api_key = {"authorization": f"Bearer {token}"}
        with kubernetes.client.ApiClient(configuration) as portal:
            check_refusals(portal, kube.namespace, unmanaged)
    finally:
        admin_core.delete_namespace(unmanaged)


def check_refusals(portal: kubernetes.client.ApiClient, managed: str, unmanaged: str) -> None:
    batch, core = kubernetes.client.BatchV1Api(portal), kubernetes.client.CoreV1Api(portal)
    apps, leases = kubernetes.client.AppsV1Api(portal), kubernetes.client.CoordinationV1Api(portal)
    # the own Lease, by name, in the managed namespace: the token works and the Role is bound
    assert leases.read_namespaced_lease(LEASE_NAME, managed).metadata.name == LEASE_NAME
    secret_pod = {"restartPolicy": "Never", "containers": [{"name": "x", "image": "x", "volumeMounts": [
        {"name": "s", "mountPath": "/s"}]}], "volumes": [{"name": "s", "secret": {"secretName": "any"}}]}  # fmt: skip
    job = {"metadata": {"name": "reads-secrets"}, "spec": {"template": {"spec": secret_pod}}}
    cronjob = {
        "metadata": {"name": "reads-secrets"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": job["spec"]}},
    }
    for namespace in ("kube-system", unmanaged):
        refused(batch.create_namespaced_job, namespace, job, dry_run="All")
        refused(batch.create_namespaced_cron_job, namespace, cronjob, dry_run="All")
        refused(core.create_namespaced_pod, namespace, {"metadata": {"name": "x"}, "spec": secret_pod}, dry_run="All")
        refused(core.list_namespaced_secret, namespace)
        refused(core.delete_namespaced_config_map, "any", namespace, dry_run="All")
        refused(apps.patch_namespaced_deployment, "any", namespace, {"metadata": {"labels": {"a": "b"}}})
        refused(leases.create_namespaced_lease, namespace, {"metadata": {"name": LEASE_NAME}}, dry_run="All")
    # the API server's own Service and EndpointSlice, by name (the gateway never routes to them), and no other
    assert core.read_namespaced_service("kubernetes", "default").spec.cluster_ip
    try:  # this control plane's API server may not write its slice; RBAC answers before the lookup (403, not 404)
        kubernetes.client.DiscoveryV1Api(portal).read_namespaced_endpoint_slice("kubernetes", "default")
    except kubernetes.client.ApiException as error:
        assert error.status == 404, error.body
    refused(core.list_namespaced_service, "default")
    refused(core.read_namespaced_service, "kube-dns", "kube-system")
    refused(core.read_namespaced_service, "any", unmanaged)
    refused(core.read_namespaced_pod_log, "app", unmanaged)  # pod logs outside the managed namespaces
    refused(core.read_namespaced_pod, "app", unmanaged)  # pods are listed (admission), never read one by one
    for name in OTHER_CONTROLLERS_LEASES:  # another controller's leader election
        refused(leases.read_namespaced_lease, name, "kube-system")
        refused(leases.replace_namespaced_lease, name, "kube-system", {"metadata": {"name": name}, "spec": {
            "holderIdentity": "inference-portal"}})  # fmt: skip
    # inside the managed namespace: no Secret, no pod of its own, no Lease but its own
    refused(core.list_namespaced_secret, managed)
    refused(core.create_namespaced_pod, managed, {"metadata": {"name": "x"}, "spec": secret_pod}, dry_run="All")
    refused(leases.create_namespaced_lease, managed, {"metadata": {"name": "another"}}, dry_run="All")
    refused(leases.read_namespaced_lease, "another", managed)


def _pod(**spec) -> dict:
    return {"restartPolicy": "Never", "containers": [{"name": "x", "image": "x"}], **spec}


def _escalations() -> dict[str, tuple[dict, str]]:
    """Pod specs the portal's controllers never generate, each with the field its refusal names."""
    secret_volume = {"volumes": [{"name": "s", "secret": {"secretName": "any"}}],
                     "containers": [{"name": "x", "image": "x", "volumeMounts": [{"name": "s", "mountPath": "/s"}]}]}
    token = {"volumes": [{"name": "t", "projected": {"sources": [{"secret": {"name": "any"}}]}}]}
    env = {"containers": [{"name": "x", "image": "x", "env": [
        {"name": "S", "valueFrom": {"secretKeyRef": {"name": "any", "key": "k"}}}]}]}
    env_from = {"containers": [{"name": "x", "image": "x", "envFrom": [{"secretRef": {"name": "any"}}]}]}
    init = {"initContainers": [{"name": "i", "image": "x", "envFrom": [{"secretRef": {"name": "any"}}]}]}
    node = {"hostPID": True, "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
            "containers": [{"name": "x", "image": "x", "volumeMounts": [{"name": "root", "mountPath": "/host"}]}]}
    privileged = {"containers": [{"name": "x", "image": "x", "securityContext": {"privileged": True}}]}
    return {
        "secret volume": (_pod(**secret_volume), "spec.volumes"),
        "projected secret": (_pod(**token), "spec.volumes"),
        "secretKeyRef": (_pod(**env), "env/envFrom"),
        "envFrom secret": (_pod(**env_from), "env/envFrom"),
        "init container's secret": (_pod(**init), "env/envFrom"),
        "another ServiceAccount": (_pod(serviceAccountName="ops"), "spec.serviceAccountName"),
        "hostPID and hostPath /": (_pod(**node), "spec.volumes"),
        "hostNetwork": (_pod(hostNetwork=True), "hostNetwork/hostPID/hostIPC"),
        "privileged": (_pod(**privileged), "securityContext"),
    }


def refused_by_policy(what: str, field: str, call, *args, **kwargs) -> None:
    """403 from the pod-template policy (not RBAC: the message names the field and the rule)."""
    with pytest.raises(kubernetes.client.ApiException) as refusal:
        call(*args, **kwargs)
    body = refusal.value.body
    assert refusal.value.status == 403 and field in body and "the portal's ServiceAccount may" in body, (what, body)


def test_in_the_managed_namespace_no_secret_other_service_account_or_node(kube, control_plane, admin_client) -> None:
    token = service_account_token(admin_client, deploy_rbac(kube.namespace), f"{PORTAL}-templates")
    admin_core = kubernetes.client.CoreV1Api(admin_client)
    # what a real namespace holds: a Secret, and a ServiceAccount bound to `admin` there
    admin_core.create_namespaced_secret(kube.namespace, {"metadata": {"name": "any"}, "stringData": {"k": "v"}})
    admin_core.create_namespaced_service_account(kube.namespace, {"metadata": {"name": "ops"}})
    kubernetes.client.RbacAuthorizationV1Api(admin_client).create_namespaced_role_binding(kube.namespace, {
        "metadata": {"name": "ops-admin"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole", "name": "admin"}, "subjects": [{"kind": "ServiceAccount", "name": "ops",
        "namespace": kube.namespace}]})  # fmt: skip
    configuration = kubernetes.client.Configuration()
    configuration.host, configuration.ssl_ca_cert = control_plane.url, str(control_plane.workdir / "ca.crt")
    configuration.api_key = {"authorization": f"Bearer {token}"}
    with kubernetes.client.ApiClient(configuration) as portal:
        batch, apps = kubernetes.client.BatchV1Api(portal), kubernetes.client.AppsV1Api(portal)

        def job(pod: dict) -> dict:
            return {"metadata": {"name": "escalation"}, "spec": {"template": {"spec": pod}}}

        def policy_in_force() -> bool:  # the API server loads policies from an informer, as RBAC
            try:
                batch.create_namespaced_job(kube.namespace, job(_escalations()["hostPID and hostPath /"][0]),
                                            dry_run="All")  # fmt: skip
            except kubernetes.client.ApiException as error:
                assert error.status == 403, error.body
                return True
            return False

        wait_for(policy_in_force, message="the pod-template admission policy to be enforced")
        plain = job(_pod())
        assert batch.create_namespaced_job(kube.namespace, plain, dry_run="All").metadata.name == "escalation"
        for what, (pod, field) in _escalations().items():
            refused_by_policy(what, field, batch.create_namespaced_job, kube.namespace, job(pod), dry_run="All")
            cronjob = {"metadata": {"name": "escalation"},
                       "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": job(pod)["spec"]}}}
            refused_by_policy(what, field, batch.create_namespaced_cron_job, kube.namespace, cronjob, dry_run="All")
            deployment = {"metadata": {"name": "escalation"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
                          "template": {"metadata": {"labels": {"a": "b"}}, "spec": {**pod, "restartPolicy": "Always"}}}}
            refused_by_policy(what, field, apps.create_namespaced_deployment, kube.namespace, deployment, dry_run="All")
    # the namespace enforces the baseline Pod Security Standard on pods, whoever makes them
    node_pod = {"metadata": {"name": "node"}, "spec": _escalations()["hostPID and hostPath /"][0]}
    with pytest.raises(kubernetes.client.ApiException) as refusal:
        admin_core.create_namespaced_pod(kube.namespace, node_pod, dry_run="All")
    assert refusal.value.status == 403 and "violates PodSecurity" in refusal.value.body, refusal.value.body
    assert "baseline:" in refusal.value.body and "hostPID" in refusal.value.body, refusal.value.body


def test_cluster_wide_rights_only_read_and_the_lease_is_the_watchers() -> None:
    cluster_role = find("ClusterRole")
    assert all(set(rule["verbs"]) <= READ_VERBS for rule in cluster_role["rules"]), cluster_role["rules"]
    granted = {resource for rule in cluster_role["rules"] for resource in rule["resources"]}
    assert not granted & {"secrets", "pods/log", "jobs", "cronjobs", "deployments", "configmaps", "leases"}
    pods = [rule for rule in cluster_role["rules"] if "pods" in rule["resources"]]  # admission: what nodes carry,
    assert pods == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}], pods  # an informer
    documents = managed_namespace("team-a")
    lease_rules = [r for d in documents if d["kind"] == "Role" for r in d["rules"] if "leases" in r["resources"]]
    assert lease_rules == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                            "resourceNames": [LEASE_NAME], "verbs": ["get", "update"]}]  # fmt: skip
    lease = next(d for d in documents if d["kind"] == "Lease")
    assert lease["metadata"] == {"name": LEASE_NAME, "namespace": "team-a", "labels": lease["metadata"]["labels"]}
    binding = next(d for d in documents if d["kind"] == "RoleBinding")
    assert binding["subjects"] == find("ClusterRoleBinding")["subjects"]  # the portal's own ServiceAccount
