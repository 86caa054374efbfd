"""Flux's source-controller and kustomize-controller for the GitOps tests and ``make run GITOPS=1``
(issue 45): the GitOps engine that applies what is merged in Gitea to the cluster. Built from the
pinned Go modules in ``tools/flux`` (cached by hash, outside the clone, with each controller's CRDs
beside its binary) and run out of cluster against a control plane's admin kubeconfig, as a
developer runs a controller: no image, no Deployment.

source-controller clones a GitRepository and serves the result as a tarball from its storage
server; kustomize-controller downloads it from the URL source-controller advertises and applies a
path of it. Both servers are on loopback ports of their own (``--storage-addr`` and
``--storage-adv-addr`` name the same one), metrics are off, leader election is off (one replica).
They act only on the Flux objects of their ``namespace`` (``--watch-all-namespaces=false``), so two
instances on one cluster (a test's and the demo's) never reconcile each other's.

``flux.watch(...)`` makes what ``flux create source git`` and ``flux create kustomization`` make: a
Secret with the forge token (basic auth, the token as password, as Gitea takes it), a GitRepository
and a Kustomization (``prune: true``), both every ``interval`` (5 s in the tests: the time from a
merge to the cluster is at most one interval plus the apply).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import requests

from devstack.control_plane import (
    Process,
    apply_crds,
    check_all_alive,
    keep_logs,
    start_process,
    stop_all,
    wait_until,
)
from devstack.go_tools import build_tool
from devstack.ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO_ROOT / "tools" / "flux" / "build.sh"
NAMESPACE = "flux-system"  # where Flux's own objects live by default, as `flux install` puts them
SOURCE_API = ("source.toolkit.fluxcd.io", "v1", "gitrepositories")
KUSTOMIZE_API = ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
# Bounds a start or a reconcile that never completes; either takes seconds, tens at load 20.
STEP_BOUND_SECONDS = 300.0


class FluxUnavailable(Exception):
    """No Go toolchain to build the controllers with: the reason says how to get one."""


@dataclass(frozen=True)
class Binaries:
    source_controller: Path
    kustomize_controller: Path


def build_binaries(say: Callable[[str], None] | None = None) -> Binaries:
    """Both controllers (``tools/flux/build.sh``, cached by hash); their CRDs in ``crds/`` beside each."""
    built = build_tool(BUILD_SCRIPT, "Flux's controllers", FluxUnavailable, say)
    source, kustomize = (Path(line) for line in built.stdout.split())
    return Binaries(source, kustomize)


def ready_condition(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    """A Flux object's ``Ready`` condition (status, reason, message), or None before it has one."""
    for condition in ((obj or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition
    return None


@dataclass
class Flux:
    """The two controllers, running against ``kubeconfig`` (``api_client``: the same cluster)."""

    workdir: Path
    binaries: Binaries
    kubeconfig: Path
    api_client: kubernetes.client.ApiClient
    namespace: str = NAMESPACE  # the only namespace whose GitRepositories and Kustomizations it acts on
    processes: list[Process] = field(default_factory=list)
    storage_port: int = 0

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> Flux:
        """Install the CRDs, make the namespace, start both controllers; returns once both are ready."""
        for binary in (self.binaries.source_controller, self.binaries.kustomize_controller):
            apply_crds(self.api_client, binary.parent / "crds")
        core = kubernetes.client.CoreV1Api(self.api_client)
        try:
            core.create_namespace({"metadata": {"name": self.namespace}})
        except kubernetes.client.ApiException as error:
            if error.status != 409:
                raise
        self.storage_port = free_port()
        storage = f"127.0.0.1:{self.storage_port}"
        (self.workdir / "storage").mkdir(exist_ok=True)
        self._start("source-controller", self.binaries.source_controller, [
            f"--storage-path={self.workdir / 'storage'}", f"--storage-addr={storage}",
            f"--storage-adv-addr={storage}", "--artifact-retention-records=2",
        ])
        self._start("kustomize-controller", self.binaries.kustomize_controller, ["--no-remote-bases=true"])
        return self

    def stop(self) -> None:
        stop_all(self.processes)

    def check_alive(self) -> None:
        check_all_alive(self.processes)

    def _start(self, name: str, binary: Path, args: list[str]) -> None:
        health = free_port()
        process = start_process(name, [
            str(binary), "--metrics-addr=0", f"--health-addr=127.0.0.1:{health}", "--watch-all-namespaces=false",
            *args,
        ], self.workdir, env={**os.environ, "KUBECONFIG": str(self.kubeconfig), "RUNTIME_NAMESPACE": self.namespace})
        self.processes.append(process)
        self._wait(lambda: _answers(f"http://127.0.0.1:{health}/readyz"), f"{name} to be ready")

    # -- what Flux watches -----------------------------------------------------------------------
    def watch(self, name: str, url: str, username: str, token: str, path: str = "./",
              branch: str = "main", interval: str = "5s") -> None:
        """A GitRepository ``name`` for ``url`` (``branch``; basic auth ``username``/``token`` from a
        Secret) and a Kustomization ``name`` that applies ``path`` of it, pruning what leaves Git."""
        core = kubernetes.client.CoreV1Api(self.api_client)
        secret = {"metadata": {"name": f"{name}-auth", "namespace": self.namespace},
                  "stringData": {"username": username, "password": token}}
        try:
            core.create_namespaced_secret(self.namespace, secret)
        except kubernetes.client.ApiException as error:
            if error.status != 409:
                raise
            core.replace_namespaced_secret(f"{name}-auth", self.namespace, secret)
        self._create(SOURCE_API, "GitRepository", name, {
            "url": url, "interval": interval, "timeout": "60s", "ref": {"branch": branch},
            "secretRef": {"name": f"{name}-auth"}})
        self._create(KUSTOMIZE_API, "Kustomization", name, {
            "interval": interval, "retryInterval": interval, "timeout": "60s", "path": path, "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": name}})

    def unwatch(self, name: str) -> None:
        """Delete the Kustomization (pruning what it applied), the GitRepository and the Secret."""
        custom = kubernetes.client.CustomObjectsApi(self.api_client)
        for group, version, plural in (KUSTOMIZE_API, SOURCE_API):
            _ignore_missing(lambda g=group, v=version, p=plural: custom.delete_namespaced_custom_object(
                g, v, self.namespace, p, name))
        _ignore_missing(lambda: kubernetes.client.CoreV1Api(self.api_client).delete_namespaced_secret(
            f"{name}-auth", self.namespace))

    def read(self, api: tuple[str, str, str], name: str) -> dict[str, Any] | None:
        try:
            return kubernetes.client.CustomObjectsApi(self.api_client).get_namespaced_custom_object(
                *api[:2], self.namespace, api[2], name)
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def applied_revision(self, name: str) -> str:
        """The Kustomization's last applied revision (``main@sha1:<sha>``), "" before the first apply."""
        return ((self.read(KUSTOMIZE_API, name) or {}).get("status") or {}).get("lastAppliedRevision", "")

    def wait_applied(self, name: str, commit: str) -> dict[str, Any]:
        """Until the Kustomization ``name`` has applied ``commit`` and is Ready; its Ready condition.
        A Kustomization that fails says why (its condition's message) when the bound runs out."""
        def applied() -> dict[str, Any] | None:
            condition = ready_condition(self.read(KUSTOMIZE_API, name))
            if self.applied_revision(name).endswith(commit) and condition and condition["status"] == "True":
                return condition
            return None
        return self._wait(applied, f"Kustomization {name} to apply {commit}",
                          explain=lambda: f"{ready_condition(self.read(SOURCE_API, name))} / "
                                          f"{ready_condition(self.read(KUSTOMIZE_API, name))}")

    def _create(self, api: tuple[str, str, str], kind: str, name: str, spec: dict[str, Any]) -> None:
        group, version, plural = api
        body = {"apiVersion": f"{group}/{version}", "kind": kind,
                "metadata": {"name": name, "namespace": self.namespace}, "spec": spec}
        custom = kubernetes.client.CustomObjectsApi(self.api_client)
        try:
            custom.create_namespaced_custom_object(group, version, self.namespace, plural, body)
        except kubernetes.client.ApiException as error:
            if error.status != 409:
                raise
            custom.patch_namespaced_custom_object(group, version, self.namespace, plural, name, {"spec": spec})

    def _wait(self, condition: Callable[[], Any], what: str, explain: Callable[[], str] | None = None) -> Any:
        return wait_until(condition, what, self.check_alive, STEP_BOUND_SECONDS, explain)


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).ok
    except requests.RequestException:
        return False


def _ignore_missing(call: Callable[[], Any]) -> None:
    try:
        call()
    except kubernetes.client.ApiException as error:
        if error.status != 404:
            raise


@contextmanager
def running_flux(kubeconfig: Path, api_client: kubernetes.client.ApiClient,
                 binaries: Binaries | None = None) -> Iterator[Flux]:
    """Build (when needed), start against ``kubeconfig``, yield, stop; the logs are kept in
    test-artifacts/flux/ when the block fails."""
    workdir = Path(tempfile.mkdtemp(prefix="flux-"))
    flux = Flux(workdir=workdir, binaries=binaries or build_binaries(), kubeconfig=kubeconfig,
                api_client=api_client)
    try:
        yield flux.start()
    except Exception:
        keep_logs(workdir, "flux", "storage")
        raise
    finally:
        flux.stop()
        shutil.rmtree(workdir, ignore_errors=True)
