"""The GitOps benchmarks' stack: the tests' control plane behind the fault proxy, a Gitea, and (for
the merge figures) Flux applying the repository; one namespace in git mode, edited by one person."""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from django.conf import settings
from django.contrib.auth.models import User

from accounts.models import ALL_NAMESPACES, NamespaceGrant, Team
from clusters.models import AuditEntry, SyncState
from clusters.sync.audit import Actor
from clusters.web.services import assign_manifest, save_portal_edit
from devstack.control_plane import apply_crds_to, running_control_plane
from devstack.flux import running_flux
from devstack.gitea import ADMIN_USER, DEFAULT_BRANCH, running_gitea
from gitops.drift import check_drift
from gitops.forge import forge_for
from gitops.manifests import git_manifest, render
from gitops.models import ChangeMode, ProposedChange
from gitops.scopes import path_for
from models_app.models import InferenceModel
from tests.support.clusters import KubeCluster
from tests.support.fault_proxy import FaultProxy
from tests.support.gitops import ORGANISATION, WATCHED_PATH, GitOpsRepo

WRITES = ("create", "update", "patch", "delete")


@dataclass
class Stack:
    kube: KubeCluster
    repo: GitOpsRepo
    actor: Actor
    cluster_id: int

    def forge_cpu_seconds(self) -> float:
        """CPU time Gitea has used so far, its git child processes included (/proc/<pid>/stat:
        utime, stime, cutime, cstime)."""
        fields = Path(f"/proc/{self.repo.gitea.process.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


@contextmanager
def git_mode_stack(with_flux: bool) -> Iterator[Stack]:
    with ExitStack() as stack:
        plane = stack.enter_context(running_control_plane(prepare=apply_crds_to))
        api_client = stack.enter_context(plane.api_client())
        gitea = stack.enter_context(running_gitea())
        flux = stack.enter_context(running_flux(plane.kubeconfig, api_client)) if with_flux else None
        workdir = plane.workdir
        proxy = FaultProxy(plane.url, str(workdir / "ca.crt"), str(workdir / "apiserver.crt"),
                           str(workdir / "apiserver.key")).start()  # fmt: skip
        stack.callback(proxy.stop)
        kube = KubeCluster(api_client, name="test", plane=plane, proxy=proxy)
        stack.callback(kube.close)
        gitea.create_repository(ORGANISATION, kube.namespace)
        repo = GitOpsRepo(gitea, flux, ORGANISATION, kube.namespace)
        if flux is not None:
            flux.watch(kube.namespace, repo.clone_url, ADMIN_USER, gitea.token, path=f"./{WATCHED_PATH}")
            stack.callback(flux.unwatch, kube.namespace)
        cluster = kube.register()
        ChangeMode.objects.create(cluster=cluster, namespace=kube.namespace, mode=ChangeMode.Mode.GIT,
                                  forge=ChangeMode.Forge.GITEA, repository_url=repo.web_url, token=gitea.token,
                                  allow_insecure_http=True)  # fmt: skip
        team = Team.objects.create(name="bench")
        NamespaceGrant.objects.create(team=team, cluster=None, namespace=ALL_NAMESPACES)
        user = User.objects.create_user("bench-editor")
        team.members.add(user)
        yield Stack(kube, repo, Actor("bench-editor", AuditEntry.Source.API, user), cluster.pk)


@dataclass
class Opened:
    """Per pull request opened: wall ms, the portal's and Gitea's CPU ms, the portal's calls to Gitea."""

    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    forge_cpus: list[float] = field(default_factory=list)
    forge_calls: list[int] = field(default_factory=list)
    cluster_writes: int = 0  # requests that write, sent to the API server meanwhile (all of them)


def forge_calls(stack: Stack) -> list[str]:
    """The calls the portal makes to the namespace's forge from now on, in this thread (where the
    benchmarks run the apply, eagerly), as ``METHOD path``: a hook on the forge's session."""
    seen: list[str] = []
    session = forge_for(ChangeMode.objects.get(cluster_id=stack.cluster_id)).session
    session.hooks["response"].append(lambda response, *args, **kwargs: seen.append(
        f"{response.request.method} {urlsplit(response.request.url).path}"))  # fmt: skip
    return seen


def open_pull_requests(stack: Stack, count: int) -> Opened:
    """``count`` new models saved in git mode, one pull request each."""
    opened = Opened()
    calls = forge_calls(stack)
    sample = yaml.safe_load((Path(settings.SAMPLES_DIR) / "inferencemodel-mistral-7b.yaml").read_text())
    for index in range(count):
        name = f"gitops-{index:03d}"
        manifest = {**sample, "metadata": {"name": name, "namespace": stack.kube.namespace},
                    "spec": {**sample["spec"], "modelName": name}}  # one gateway id each
        row = InferenceModel(cluster_id=stack.cluster_id)
        assign_manifest(row, manifest)
        row.full_clean()
        seen, calls_before = len(stack.kube.proxy.requests_seen), len(calls)
        wall, cpu, forge_cpu = time.perf_counter(), time.process_time(), stack.forge_cpu_seconds()
        save_portal_edit(row, stack.actor, made_from=None)
        opened.walls.append((time.perf_counter() - wall) * 1000)
        opened.cpus.append((time.process_time() - cpu) * 1000)
        opened.forge_cpus.append((stack.forge_cpu_seconds() - forge_cpu) * 1000)
        opened.forge_calls.append(len(calls) - calls_before)
        opened.cluster_writes += sum(1 for r in stack.kube.proxy.requests_seen[seen:] if r.verb in WRITES)
        if not ProposedChange.objects.filter(object_id=row.pk, number__isnull=False).exists():
            raise RuntimeError(f"no pull request for {row}: {InferenceModel.objects.get(pk=row.pk).last_error}")
    if not all(opened.forge_calls):
        raise RuntimeError("the apply ran in another thread: the forge calls were not seen")
    print(f"  forge calls of the last pull request: {calls[-opened.forge_calls[-1]:]}")
    return opened


def drift_rounds(stack: Stack, count: int) -> tuple[int, int, float, int]:
    """``count`` synced models whose files Git holds (one commit); the forge calls of a first drift
    round (every blob still to read), of a second (none changed), the second's wall ms, and how many
    objects it found drifted (0 expected: each file is what its row holds)."""
    mode = ChangeMode.objects.get(cluster_id=stack.cluster_id)
    sample = yaml.safe_load((Path(settings.SAMPLES_DIR) / "inferencemodel-mistral-7b.yaml").read_text())
    files = []
    for index in range(count):
        name = f"drift-{index:03d}"
        row = InferenceModel.objects.create(cluster_id=stack.cluster_id, namespace=stack.kube.namespace, name=name,
                                            spec={**sample["spec"], "modelName": name},
                                            sync_state=SyncState.SYNCED)  # fmt: skip
        text = render(git_manifest(InferenceModel, row.desired_document(), row.namespace, row.name))
        files.append({"operation": "create", "path": path_for(mode, row),
                      "content": base64.b64encode(text.encode()).decode()})  # fmt: skip
    repo = stack.repo
    repo.gitea.call("POST", f"/repos/{repo.owner}/{repo.name}/contents",
                    json={"branch": DEFAULT_BRANCH, "message": "the drift benchmark's files", "files": files})
    calls = forge_calls(stack)
    check_drift()
    cold = len(calls)
    wall = time.perf_counter()
    drifted = check_drift()
    return cold, len(calls) - cold, (time.perf_counter() - wall) * 1000, drifted
