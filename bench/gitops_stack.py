"""The GitOps benchmarks' stack: the tests' control plane behind the fault proxy, a Gitea, and (for
the merge figures) Flux applying the repository; one namespace in git mode, edited by one person."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from django.conf import settings
from django.contrib.auth.models import User

from accounts.models import ALL_NAMESPACES, NamespaceGrant, Team
from clusters.models import AuditEntry
from clusters.sync.audit import Actor
from clusters.web.services import assign_manifest, save_portal_edit
from devstack.control_plane import apply_crds_to, running_control_plane
from devstack.flux import running_flux
from devstack.gitea import ADMIN_USER, running_gitea
from gitops.models import ChangeMode, ProposedChange
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


def open_pull_requests(stack: Stack, count: int) -> tuple[list[float], list[float], list[float], int]:
    """``count`` new models saved in git mode, one pull request each: wall ms, the portal's and
    Gitea's CPU ms per save, and the writes the portal sent the API server meanwhile."""
    walls, cpus, forge_cpus, writes = [], [], [], 0
    sample = yaml.safe_load((Path(settings.SAMPLES_DIR) / "inferencemodel-mistral-7b.yaml").read_text())
    for index in range(count):
        name = f"gitops-{index:03d}"
        manifest = {**sample, "metadata": {"name": name, "namespace": stack.kube.namespace},
                    "spec": {**sample["spec"], "modelName": name}}  # one gateway id each
        row = InferenceModel(cluster_id=stack.cluster_id)
        assign_manifest(row, manifest)
        row.full_clean()
        seen = len(stack.kube.proxy.requests_seen)
        wall, cpu, forge_cpu = time.perf_counter(), time.process_time(), stack.forge_cpu_seconds()
        save_portal_edit(row, stack.actor, made_from=None)
        walls.append((time.perf_counter() - wall) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
        forge_cpus.append((stack.forge_cpu_seconds() - forge_cpu) * 1000)
        writes += sum(1 for r in stack.kube.proxy.requests_seen[seen:] if r.verb in WRITES)
        if not ProposedChange.objects.filter(object_id=row.pk, number__isnull=False).exists():
            raise RuntimeError(f"no pull request for {row}: {InferenceModel.objects.get(pk=row.pk).last_error}")
    return walls, cpus, forge_cpus, writes
