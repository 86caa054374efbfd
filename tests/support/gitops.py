"""The real GitOps stack for the tests of issue 45: a Gitea server and Flux's source and kustomize
controllers, started once per test process (session fixtures, as the control plane is), and for
each test a repository of its own that Flux watches and applies into the session's control plane.

- ``gitea``: the running :class:`devstack.gitea.Gitea` (``gitea.url``, ``gitea.token``: the admin's
  API token, all scopes; ``gitea.call(...)`` and the pull-request helpers).
- ``flux``: the running :class:`devstack.flux.Flux` against the session's control plane (or the
  cluster ``KUBECONFIG`` names), Flux's CRDs installed.
- ``gitops_repo``: a fresh private repository ``portal/<this test's namespace>`` with a
  GitRepository and a Kustomization (5 s interval, ``prune: true``) applying its ``clusters/``
  folder, where the portal's default layout puts files
  (``clusters/<cluster>/<namespace>/<kind>/<name>.yaml``); deleted after the test, with what Flux
  applied from it. ``gitops_repo.web_url`` is what a git-mode ``repository_url`` takes.

They skip with the reason when there is no Go toolchain to build Gitea or Flux (and fail under CI,
which must run them); a build that fails is an error, never a skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import kubernetes
import pytest
import yaml

from devstack.control_plane import ControlPlane
from devstack.flux import Flux, FluxUnavailable, running_flux
from devstack.flux import build_binaries as build_flux
from devstack.gitea import ADMIN_USER, DEFAULT_BRANCH, Gitea, GiteaUnavailable, running_gitea
from devstack.gitea import build_binary as build_gitea
from tests.support.clusters import KubeCluster, external_kubeconfig

ORGANISATION = "portal"
WATCHED_PATH = "clusters"  # the folder of the repository Flux applies (its sub-folders included)
CLUSTER = "test"  # the Cluster row's name kube.register() gives, the <cluster> of the layout


def _unavailable(reason: Exception) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the real GitOps stack: {reason}")
    pytest.skip(str(reason))


@pytest.fixture(scope="session")
def gitea() -> Iterator[Gitea]:
    try:
        binary = build_gitea()
    except GiteaUnavailable as reason:
        _unavailable(reason)
    with running_gitea(binary) as server:
        yield server


@pytest.fixture(scope="session")
def flux(control_plane: ControlPlane | None) -> Iterator[Flux]:
    try:
        binaries = build_flux()
    except FluxUnavailable as reason:
        _unavailable(reason)
    if control_plane is None:
        kubeconfig = Path(external_kubeconfig())
        api_client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    else:
        kubeconfig, api_client = control_plane.kubeconfig, control_plane.api_client()
    with api_client, running_flux(kubeconfig, api_client, binaries) as controllers:
        yield controllers


@dataclass
class GitOpsRepo:
    """One test's repository in Gitea, applied by Flux: ``commit`` on ``main`` or a branch,
    ``pull_request`` + ``merge``, then ``wait_applied(sha)`` until the cluster has it."""

    gitea: Gitea
    flux: Flux
    owner: str
    name: str

    @property
    def clone_url(self) -> str:
        return self.gitea.clone_url(self.owner, self.name)

    @property
    def web_url(self) -> str:
        """The repository's web address (a git-mode ChangeMode's ``repository_url``)."""
        return f"{self.gitea.url}/{self.owner}/{self.name}"

    def manifest_path(self, namespace: str, kind: str, name: str, cluster: str = CLUSTER) -> str:
        """Where the portal's default layout puts a manifest, inside the folder Flux applies."""
        return f"{WATCHED_PATH}/{cluster}/{namespace}/{kind.lower()}/{name}.yaml"

    def commit(self, manifest: dict, message: str, branch: str = DEFAULT_BRANCH,
               new_branch: str | None = None) -> str:
        """Commit ``manifest`` at its :meth:`manifest_path`; the commit's sha."""
        metadata = manifest["metadata"]
        path = self.manifest_path(metadata["namespace"], manifest["kind"], metadata["name"])
        done = self.gitea.put_file(self.owner, self.name, path, yaml.safe_dump(manifest, sort_keys=False),
                                   message, branch=branch, new_branch=new_branch)
        return done["commit"]["sha"]

    def pull_request(self, head: str, title: str) -> int:
        return self.gitea.open_pull_request(self.owner, self.name, head, title)["number"]

    def merge(self, number: int) -> str:
        """Merge pull request ``number``; the merge commit's sha."""
        return self.gitea.merge_pull_request(self.owner, self.name, number)

    def wait_applied(self, commit: str) -> None:
        """Until Flux has applied ``commit`` (a sha on ``main``) to the cluster."""
        self.flux.wait_applied(self.name, commit)


@pytest.fixture
def gitops_repo(gitea: Gitea, flux: Flux, kube: KubeCluster) -> Iterator[GitOpsRepo]:
    """A repository named after this test's namespace, watched by Flux; gone after the test."""
    name = kube.namespace
    gitea.create_repository(ORGANISATION, name)
    flux.watch(name, gitea.clone_url(ORGANISATION, name), ADMIN_USER, gitea.token, path=f"./{WATCHED_PATH}")
    yield GitOpsRepo(gitea, flux, ORGANISATION, name)
    flux.unwatch(name)
    gitea.call("DELETE", f"/repos/{ORGANISATION}/{name}")
