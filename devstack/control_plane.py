"""A real Kubernetes control plane for the tests and the live demo (``make run``, ``manage.py
control_plane``): etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok (simulated nodes and pods), built from the pinned Go modules in
``tools/kube-control-plane`` and started on loopback with generated certificates and a token.

The flags follow controller-runtime's envtest (``pkg/internal/testing/controlplane``) with these
choices, each for a reason:
- ``--watch-cache=false``: watches and paged lists are served by etcd, so a real etcd compaction
  answers 410 to a watch or a continue token from before it (the watch cache keeps its own window
  and would hide the compaction). etcd's progress notifications still give bookmarks.
- ``--authorization-mode=RBAC``: the portal's own RBAC (``blockOwnerDeletion`` needs ``update`` on
  ``<kind>/finalizers``, a least-privilege role) is checked as a real cluster checks it; the admin
  token is in ``system:masters``. ``OwnerReferencesPermissionEnforcement`` is on, as in clusters that
  enforce ``blockOwnerDeletion`` (OpenShift and many hardened ones): setting it on an owner reference
  needs ``update`` on the owner's ``finalizers``, and owner references need ``delete`` on the object.
- The controller manager runs the controllers whose work the portal relies on and nothing else:
  garbage collector, Deployments, ReplicaSets, Jobs, CronJobs, namespaces, service accounts. With
  no node-lifecycle controller to lift the ``not-ready`` taint that the ``TaintNodesByCondition``
  admission plugin puts on new Nodes, that plugin is off (kwok keeps no heartbeats either).
- kwok manages the nodes annotated ``kwok.x-k8s.io/node: fake`` with the stages of
  ``devstack/kwok-stages.yaml``: pods become Running and Ready, Job pods complete, and a Job
  pod whose first container's image ends in ``:fail`` fails with exit code 1.
- Pod logs are real: kwok's kubelet-like server (TLS, the API server's serving certificate, which
  names 127.0.0.1) answers ``/containerLogs`` for every pod with ``POD_LOG_LINES`` (a kwok
  ``ClusterLogs``). The simulated nodes report InternalIP 127.0.0.1 and that server's port as their
  kubelet endpoint, and kube-apiserver reaches it by InternalIP, verifying it with the test CA; so
  ``read_namespaced_pod_log`` goes through the API server exactly as on a real cluster.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import requests
import trustme
import yaml

from common.child_processes import die_with_parent
from devstack.go_tools import NO_GO, run_build
from devstack.ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO_ROOT / "tools" / "kube-control-plane" / "build.sh"
KWOK_STAGES = Path(__file__).with_name("kwok-stages.yaml")
CRD_DIR = REPO_ROOT / "platform" / "crds"
ADMIN_TOKEN = "portal-tests-admin-token"
CONTROLLERS = (
    "garbage-collector-controller,deployment-controller,replicaset-controller,job-controller,"
    "cronjob-controller,namespace-controller,serviceaccount-controller"
)
# How long a start may wait for a part that runs but never gets ready, and how often it says so.
START_BOUND_SECONDS = 600.0
SAY_EVERY_SECONDS = 15.0
FAKE_NODE_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
# What every simulated container "printed": kwok serves these lines as its log (CRI log format).
POD_LOG_LINES = ("runner: loading model", "runner: serving on :8000", "runner: 3 requests done")

# Simulated nodes: two pools, as NODE_POOL_LABEL (inference-pool) groups them. The GPU pool carries
# the labels NVIDIA GPU feature discovery sets and the node selectors of the reference samples.
NODE_POOLS: dict[str, dict[str, Any]] = {
    "gpu-a100": {
        "count": 2,
        "labels": {
            "accelerator": "nvidia-a100-80gb",
            "gpu-type": "nvidia-a100",
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
            "nvidia.com/gpu.memory": "81920",
        },
        "capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "4", "pods": "110"},
    },
    # A second GPU type, as GPU feature discovery labels a GKE g2-standard-24 (2 x L4, 23034 MiB each).
    "gpu-l4": {
        "count": 2,
        "labels": {
            "accelerator": "nvidia-l4",
            "gpu-type": "nvidia-l4",
            "nvidia.com/gpu.product": "NVIDIA-L4",
            "nvidia.com/gpu.memory": "23034",
        },
        "capacity": {"cpu": "24", "memory": "96Gi", "nvidia.com/gpu": "2", "pods": "110"},
    },
    "default": {
        "count": 2,
        "labels": {},
        "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
    },
}


class ControlPlaneUnavailable(Exception):
    """The binaries cannot be had here (no Go toolchain): the reason says how to get it."""


def build_binaries(say: Callable[[str], None] | None = None) -> Path:
    """The folder of the built binaries (``tools/kube-control-plane/build.sh``: cached by go.sum);
    ``say`` hears the build's steps and progress, and whose build it waits for."""
    result = run_build(BUILD_SCRIPT, say)
    if result.returncode == NO_GO or (result.returncode and shutil.which("go") is None):
        raise ControlPlaneUnavailable(
            "the real control plane is built from Go modules and needs the Go toolchain: install Go "
            "(https://go.dev/doc/install or Debian's golang-go), then `make control-plane`"
        )
    if result.returncode:
        raise RuntimeError(f"building the control plane failed:\n{result.stderr[-4000:]}")
    return result.path


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def start_process(name: str, command: list[str], workdir: Path, env: dict[str, str] | None = None) -> Process:
    """``command`` in ``workdir``, its output in ``workdir/<name>.log``; in a session of its own (a
    Ctrl-C of ``make run`` reaches the supervisor, which stops it in order) and ended with the
    process that started it (:func:`die_with_parent`)."""
    log = workdir / f"{name}.log"
    popen = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=workdir, env=env,
                             start_new_session=True, preexec_fn=die_with_parent)
    return Process(name, popen, log)


def stop_all(processes: list[Process]) -> None:
    """Stop ``processes`` last started first (a controller before the API server it talks to); empties the list."""
    for process in reversed(processes):
        process.stop()
    processes.clear()


def stop_together(processes: list[Process]) -> None:
    """Stop ``processes`` that do not depend on one another: SIGTERM to all, then each waited for, so
    that their graceful exits overlap (one after another, a dozen took longer on a busy machine
    than a user waits after Ctrl-C)."""
    for process in processes:
        if process.alive():
            process.popen.send_signal(signal.SIGTERM)
    for process in processes:
        process.stop()


def check_all_alive(processes: list[Process]) -> None:
    """Raise, with its last output, for the first of ``processes`` that exited."""
    dead = [p for p in processes if not p.alive()]
    if dead:
        raise RuntimeError(f"{dead[0].name} exited:\n{dead[0].tail()}")


def wait_until(condition: Callable[[], Any], what: str, check_alive: Callable[[], None], bound: float,
               explain: Callable[[], str] | None = None) -> Any:
    """Until ``condition()`` is truthy (returns its value), calling ``check_alive()`` (which raises
    for a process that died: the failure comes at once, with its log) before each look. ``bound``
    only limits a wait that never ends; ``explain()`` adds what the wait saw to that failure."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        check_alive()
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise RuntimeError(f"no {what} within {bound:.0f} s" + (f": {explain()}" if explain else ""))


def keep_logs(workdir: Path, under: str, *ignore: str) -> None:
    """Copy ``workdir`` (less the ``ignore`` patterns: data, not logs) to test-artifacts/<under>/,
    one folder per run, for a start or a test that failed."""
    artifacts = REPO_ROOT / "test-artifacts" / under / workdir.name
    shutil.rmtree(artifacts, ignore_errors=True)
    shutil.copytree(workdir, artifacts, ignore=shutil.ignore_patterns(*ignore))


@dataclass
class ControlPlane:
    """The running control plane. ``url`` is kube-apiserver's; ``kubeconfig`` an admin kubeconfig."""

    workdir: Path
    binaries: Path
    processes: list[Process] = field(default_factory=list)
    url: str = ""
    etcd_url: str = ""
    ca_pem: str = ""
    kubeconfig: Path = Path()
    kubelet_port: int = 0
    started_in_s: float = 0.0
    say: Callable[[str], None] | None = None  # hears what a slow start waits for (the live demo's output)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self, prepare: Callable[[ControlPlane], None] | None = None) -> ControlPlane:
        """Start everything; ``prepare(plane)`` runs once kube-apiserver answers, before the
        controllers start. Apply CRDs there: the garbage collector discovers resources at start
        and then only every 30 s, so a CRD made later is unknown to it for up to 30 s (an owned
        object of a custom resource then outlives its owner until then)."""
        began = time.monotonic()
        self._write_credentials()
        self._start_etcd()
        self._start_apiserver()
        if prepare is not None:
            prepare(self)
        self._start("kube-controller-manager", [
            f"--kubeconfig={self.kubeconfig}", f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}", "--leader-elect=false", "--secure-port=0",
            f"--controllers={CONTROLLERS}", f"--service-account-private-key-file={self.workdir / 'sa.key'}",
            f"--root-ca-file={self.workdir / 'ca.crt'}", "--use-service-account-credentials=false",
            "--concurrent-gc-syncs=5", "--v=1",
        ])
        self._start("kube-scheduler", [
            f"--kubeconfig={self.kubeconfig}", f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}", "--leader-elect=false", "--secure-port=0", "--v=1",
        ])
        self._start("kwok", [
            f"--kubeconfig={self.kubeconfig}", "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            f"--config={KWOK_STAGES}", f"--config={self._write_kwok_logs()}", "--cidr=10.244.0.1/16",
            "--node-ip=127.0.0.1", f"--node-port={self.kubelet_port}",
            f"--server-address=127.0.0.1:{self.kubelet_port}",
            f"--tls-cert-file={self.workdir / 'apiserver.crt'}",
            f"--tls-private-key-file={self.workdir / 'apiserver.key'}",
        ])
        self._create_nodes()
        self._wait(self._nodes_ready, "kwok to make the simulated nodes Ready")
        self._wait(self._default_service_account_exists, "the service account controller")
        self.started_in_s = time.monotonic() - began
        return self

    def stop(self) -> None:
        stop_all(self.processes)

    def check_alive(self) -> None:
        check_all_alive(self.processes)

    # -- clients ---------------------------------------------------------------------------------
    def api_client(self, token: str = ADMIN_TOKEN, server: str | None = None) -> kubernetes.client.ApiClient:
        configuration = kubernetes.client.Configuration()
        configuration.host = server or self.url
        configuration.ssl_ca_cert = str(self.workdir / "ca.crt")
        configuration.api_key = {"authorization": f"Bearer {token}"}
        return kubernetes.client.ApiClient(configuration)

    # -- etcd ------------------------------------------------------------------------------------
    def etcd_revision(self) -> int:
        reply = requests.post(f"{self.etcd_url}/v3/kv/range", json={"key": base64.b64encode(b"/").decode()},
                              timeout=5)
        reply.raise_for_status()
        return int(reply.json()["header"]["revision"])

    def compact(self) -> int:
        """Compact etcd up to its current revision (physically): every older resourceVersion is gone."""
        revision = self.etcd_revision()
        reply = requests.post(f"{self.etcd_url}/v3/kv/compaction",
                              json={"revision": str(revision), "physical": True}, timeout=30)
        reply.raise_for_status()
        return revision

    # -- internals -------------------------------------------------------------------------------
    def _write_credentials(self) -> None:
        ca = trustme.CA()
        serving = ca.issue_cert("127.0.0.1", "localhost", "kubernetes.default.svc", "10.0.0.1")
        self.ca_pem = ca.cert_pem.bytes().decode()
        (self.workdir / "ca.crt").write_text(self.ca_pem)
        serving.cert_chain_pems[0].write_to_path(str(self.workdir / "apiserver.crt"))
        serving.private_key_pem.write_to_path(str(self.workdir / "apiserver.key"))
        # The service-account signing key: any private key will do; a second leaf's is at hand.
        ca.issue_cert("service-accounts").private_key_pem.write_to_path(str(self.workdir / "sa.key"))
        (self.workdir / "tokens.csv").write_text(f'{ADMIN_TOKEN},portal-tests-admin,1,"system:masters"\n')

    def _write_kwok_logs(self) -> Path:
        """kwok's ClusterLogs: every container of every pod logs ``POD_LOG_LINES`` (a CRI log file)."""
        stamp = "2026-01-01T00:00:00.000000000Z"
        log_file = self.workdir / "container.log"
        log_file.write_text("".join(f"{stamp} stdout F {line}\n" for line in POD_LOG_LINES))
        config = self.workdir / "kwok-logs.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterLogs", "metadata": {"name": "every-pod"},
            "spec": {"logs": [{"containers": [], "logsFile": str(log_file), "follow": False}]},
        }))
        return config

    def _start(self, name: str, args: list[str]) -> Process:
        process = start_process(name, [str(self.binaries / name), *args], self.workdir)
        self.processes.append(process)
        return process

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        self._start("etcd", [
            f"--data-dir={self.workdir / 'etcd'}", f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}", f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=default=http://127.0.0.1:{peer}", "--name=default", "--unsafe-no-fsync",
            "--watch-progress-notify-interval=1s", "--log-level=warn",
        ])
        self._wait(lambda: self._get(f"{self.etcd_url}/health"), "etcd")

    def _start_apiserver(self) -> None:
        port, self.kubelet_port = free_port(), free_port()
        self.url = f"https://127.0.0.1:{port}"
        self._start("kube-apiserver", [
            f"--etcd-servers={self.etcd_url}", f"--secure-port={port}", "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none", f"--cert-dir={self.workdir}",
            f"--tls-cert-file={self.workdir / 'apiserver.crt'}",
            f"--tls-private-key-file={self.workdir / 'apiserver.key'}",
            f"--client-ca-file={self.workdir / 'ca.crt'}",
            f"--token-auth-file={self.workdir / 'tokens.csv'}",
            f"--service-account-key-file={self.workdir / 'sa.key'}",
            f"--service-account-signing-key-file={self.workdir / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
            "--authorization-mode=RBAC", "--watch-cache=false", "--enable-priority-and-fairness=false",
            "--disable-admission-plugins=TaintNodesByCondition",
            # pod logs: reach kwok's kubelet-like server at the node's InternalIP, verified by the CA
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-certificate-authority={self.workdir / 'ca.crt'}",
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
            "--v=1",
        ])
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self.kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "test", "cluster": {"server": self.url,
                                                       "certificate-authority": str(self.workdir / "ca.crt")}}],
            "users": [{"name": "admin", "user": {"token": ADMIN_TOKEN}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
            "current-context": "test",
        }))
        self._wait(lambda: self._get(f"{self.url}/readyz", auth=True), "kube-apiserver")

    def _get(self, url: str, auth: bool = False) -> bool:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"} if auth else {}
        try:
            return requests.get(url, headers=headers, verify=str(self.workdir / "ca.crt"), timeout=2).ok
        except requests.RequestException:
            return False

    def _wait(self, condition: Callable[[], bool], what: str) -> None:
        """Until ``condition()``, while every process lives (one that exits fails at once, with its
        log), saying every ``SAY_EVERY_SECONDS`` what it still waits for. ``START_BOUND_SECONDS``
        only bounds a process that lives and never gets there: a start takes seconds on a quiet
        machine, minutes on a loaded one (a fixed 60 s failed the demo at load 11-16, issue 43)."""
        began = time.monotonic()
        said = began
        while time.monotonic() - began < START_BOUND_SECONDS:
            self.check_alive()
            if condition():
                return
            if self.say is not None and time.monotonic() - said >= SAY_EVERY_SECONDS:
                said = time.monotonic()
                self.say(f"  still waiting for {what} ({said - began:.0f} s; load {os.getloadavg()[0]:.1f})")
            time.sleep(0.1)
        raise RuntimeError(f"{what} did not come up within {START_BOUND_SECONDS:.0f} s, though running")

    def _create_nodes(self) -> None:
        with self.api_client() as client:
            core = kubernetes.client.CoreV1Api(client)
            for pool, spec in NODE_POOLS.items():
                for index in range(spec["count"]):
                    name = f"{pool}-{index}"
                    core.create_node({
                        "metadata": {
                            "name": name,
                            "annotations": FAKE_NODE_ANNOTATION,
                            "labels": {"inference-pool": pool, "kubernetes.io/hostname": name,
                                       "kubernetes.io/os": "linux", "type": "kwok", **spec["labels"]},
                        },
                        "status": {"capacity": spec["capacity"], "allocatable": spec["capacity"]},
                    })

    def _nodes_ready(self) -> bool:
        with self.api_client() as client:
            nodes = kubernetes.client.CoreV1Api(client).list_node().items
        return bool(nodes) and all(
            any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or [])) for node in nodes
        )

    def _default_service_account_exists(self) -> bool:
        with self.api_client() as client:
            try:
                kubernetes.client.CoreV1Api(client).read_namespaced_service_account("default", "default")
            except kubernetes.client.ApiException:
                return False
        return True


def apply_crds_to(plane: ControlPlane) -> None:
    with plane.api_client() as api_client:
        apply_crds(api_client)


def apply_crds(api_client: kubernetes.client.ApiClient, crd_dir: Path = CRD_DIR) -> None:
    """Create (or replace) the CRDs of ``crd_dir`` (default ``platform/crds``; the tests add KEDA's,
    devstack/flux.py Flux's) and wait until they are served."""
    extensions = kubernetes.client.ApiextensionsV1Api(api_client)
    for path in sorted(crd_dir.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        try:
            extensions.create_custom_resource_definition(crd)
        except kubernetes.client.ApiException as error:
            if error.status != 409:
                raise
            current = extensions.read_custom_resource_definition(crd["metadata"]["name"])
            crd["metadata"]["resourceVersion"] = current.metadata.resource_version
            extensions.replace_custom_resource_definition(crd["metadata"]["name"], crd)
    for path in sorted(crd_dir.glob("*.yaml")):
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        for _ in range(200):
            conditions = extensions.read_custom_resource_definition(name).status.conditions or []
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                break
            time.sleep(0.05)


@contextmanager
def running_control_plane(prepare: Callable[[ControlPlane], None] | None = None) -> Iterator[ControlPlane]:
    """Build (when needed), start, yield, stop. Logs stay in test-artifacts/control-plane/<workdir>/ on failure."""
    binaries = build_binaries()
    workdir = Path(tempfile.mkdtemp(prefix="kube-control-plane-"))
    plane = ControlPlane(workdir=workdir, binaries=binaries)
    try:
        plane.start(prepare)
        yield plane
    except Exception:
        keep_logs(workdir, "control-plane", "etcd")
        raise
    finally:
        plane.stop()
        shutil.rmtree(workdir, ignore_errors=True)

