"""platform/deploy and its managed-namespace/ Role: every manifest is accepted by a real
kube-apiserver (server-side dry run), every pod passes the namespace's restricted Pod Security
Standard, and the processes are set up as the portal needs them (probes, one beat with a writable
schedule, the migrate Job)."""

from __future__ import annotations

import shlex
from pathlib import Path

import kubernetes
import pytest

from tests.deploy.conftest import DEPLOY_DIR, apply, find, kustomization, managed_namespace, rendered

WORKLOADS = ("web", "worker", "beat", "watcher", "autoscaler")


def pod_spec(document: dict) -> dict:
    return document["spec"]["template"]["spec"]


def test_kustomization_lists_every_manifest() -> None:
    listed = set(kustomization()["resources"])
    assert listed == {path.name for path in Path(DEPLOY_DIR).glob("*.yaml")} - {"kustomization.yaml"}


def test_every_manifest_applies_with_server_side_dry_run(admin_client) -> None:
    namespace = find("Namespace")
    apply(admin_client, namespace)  # for real: the namespaced objects' dry runs need it to exist
    kinds = set()
    # the managed-namespace Role, as an overlay puts it in a namespace (here the portal's own)
    for document in rendered() + managed_namespace(namespace["metadata"]["name"]):
        result = apply(admin_client, document, dry_run=True)
        assert result["metadata"]["name"] == document["metadata"]["name"]
        kinds.add(document["kind"])
    assert {"Deployment", "Job", "Service", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
            "RoleBinding", "Lease"} <= kinds  # fmt: skip


def test_every_pod_passes_the_restricted_pod_security_standard(admin_client) -> None:
    """The namespace enforces ``restricted``; a pod that breaks it is refused (403) at creation."""
    namespace = find("Namespace")
    apply(admin_client, namespace)
    apply(admin_client, find("ServiceAccount"))  # pods naming it are admitted only once it exists
    core = kubernetes.client.CoreV1Api(admin_client)
    for document in rendered():
        if document["kind"] not in ("Deployment", "Job"):
            continue
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "pss-check-"},
               "spec": pod_spec(document)}  # fmt: skip
        core.create_namespaced_pod(namespace["metadata"]["name"], pod, dry_run="All")
    insecure = {**pod, "spec": {**pod["spec"], "securityContext": {}}}
    insecure["spec"]["containers"] = [{**c, "securityContext": {}} for c in pod["spec"]["containers"]]
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core.create_namespaced_pod(namespace["metadata"]["name"], insecure, dry_run="All")
    assert refused.value.status == 403 and "restricted" in refused.value.body


def test_web_probes_are_the_portals_liveness_and_readiness_views() -> None:
    container = pod_spec(find("Deployment", "inference-portal-web"))["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["command"] == ["python", "-m", "config.web_server"]


def test_one_beat_that_writes_its_schedule_to_a_writable_volume() -> None:
    beat = find("Deployment", "inference-portal-beat")
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"]["type"] == "Recreate"
    container = pod_spec(beat)["containers"][0]
    schedule = container["command"][container["command"].index("--schedule") + 1]
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod_spec(beat)["volumes"]}
    directory = str(Path(schedule).parent)
    assert directory in mounts and "emptyDir" in volumes[mounts[directory]]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_processes_and_identities() -> None:
    commands = {name: pod_spec(find("Deployment", f"inference-portal-{name}"))["containers"][0]["command"]
                for name in WORKLOADS}  # fmt: skip
    assert commands["watcher"] == ["python", "manage.py", "sync_watch"]
    assert commands["autoscaler"] == ["python", "manage.py", "autoscale"]
    autoscaler = find("Deployment", "inference-portal-autoscaler")  # its averages are in memory: one
    assert autoscaler["spec"]["replicas"] == 1 and autoscaler["spec"]["strategy"]["type"] == "Recreate"
    assert shlex.join(commands["worker"]).startswith("celery -A config worker -Q default,sync")
    migrate = find("Job", "inference-portal-migrate")
    assert pod_spec(migrate)["containers"][0]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    for name in ("web", "worker", "watcher", "autoscaler"):  # they talk to the cluster
        assert pod_spec(find("Deployment", f"inference-portal-{name}"))["serviceAccountName"] == "inference-portal"
    assert pod_spec(find("Deployment", "inference-portal-beat"))["automountServiceAccountToken"] is False
    assert pod_spec(migrate)["automountServiceAccountToken"] is False
    binding = find("ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "inference-portal",
                                    "namespace": kustomization()["namespace"]}]  # fmt: skip
