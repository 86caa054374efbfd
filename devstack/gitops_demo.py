"""``make run GITOPS=1`` (issue 45, docs/demo.md): beside the live demo's control plane, the local
Gitea (devstack/gitea.py) with a repository ``portal/<cluster>`` for the demo cluster, and Flux's
controllers (devstack/flux.py) applying its ``clusters/<cluster>/`` folder to that cluster every
5 s: where the portal's default layout (``clusters/<cluster>/<namespace>/<kind>/<name>.yaml``) puts
the files of a namespace in ``git`` mode. A pull request merged in Gitea reaches the cluster within
an interval, the watcher brings it to the portal.

Gitea and Flux are built when missing (``GITOPS=1`` asks for them, so the first run spends the
builds: tens of minutes on 2 busy cores, then cached); without Go the demo says why and runs
without them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from devstack import flux as flux_tools
from devstack import gitea as gitea_tools
from devstack.control_plane import ControlPlane, Process

ORGANISATION = "portal"
INTERVAL = "5s"


@dataclass
class GitOpsDemo:
    gitea: gitea_tools.Gitea
    flux: flux_tools.Flux
    cluster: str  # the demo cluster, named in the repository and the folder Flux applies
    namespace: str  # the demo namespace whose changes go through Git

    @property
    def repository(self) -> str:
        return f"{ORGANISATION}/{self.cluster}"

    @property
    def repository_url(self) -> str:
        """The repository's web address: a git-mode change mode's ``repository_url``."""
        return f"{self.gitea.url}/{self.repository}"

    def lines(self) -> list[str]:
        """The banner's lines: where Gitea is, who signs in, what Flux applies."""
        return [
            f"  GitOps:   Gitea {self.gitea.url}/ (username {gitea_tools.ADMIN_USER}, password "
            f"{self.gitea.admin_password}), repository {self.repository_url}",
            f"            its API token (a git-mode change mode's token): {self.gitea.token}",
            f"            Flux applies its {self.flux_path()} to the cluster every {INTERVAL}; namespace "
            f"{self.namespace} is the one to put in git mode (docs/demo.md)",
        ]

    def flux_path(self) -> str:
        return f"clusters/{self.cluster}/"

    @property
    def processes(self) -> list[Process]:
        """Gitea and the controllers: the demo stops when one dies, as for its other parts."""
        return [*([self.gitea.process] if self.gitea.process else []), *self.flux.processes]

    def stop(self) -> None:
        self.flux.stop()
        self.gitea.stop()


def start_gitops_demo(plane: ControlPlane, cluster: str, namespace: str, workdir: Path, say: Callable[[str], None],
                      flux_namespace: str = flux_tools.NAMESPACE) -> GitOpsDemo | None:
    """Gitea with ``portal/<cluster>`` and Flux (its objects in ``flux_namespace``) applying its
    ``clusters/<cluster>/`` to ``plane``; None, said with the reason, where they cannot be built (no Go)."""
    say("GitOps: Gitea and Flux's controllers (their first build takes tens of minutes, then cached)...")
    try:
        gitea_binary = gitea_tools.build_binary(say)
        flux_binaries = flux_tools.build_binaries(say)
    except (gitea_tools.GiteaUnavailable, flux_tools.FluxUnavailable) as reason:
        say(f"GitOps: off ({reason}).")
        return None
    for folder in ("gitea", "flux"):
        (workdir / folder).mkdir(exist_ok=True)
    server = gitea_tools.Gitea(workdir=workdir / "gitea", binary=gitea_binary).start()
    controllers = flux_tools.Flux(workdir=workdir / "flux", binaries=flux_binaries, kubeconfig=plane.kubeconfig,
                                  api_client=plane.api_client(), namespace=flux_namespace)
    demo = GitOpsDemo(server, controllers, cluster, namespace)
    try:
        server.create_repository(ORGANISATION, cluster)
        controllers.start()
        controllers.watch(cluster, server.clone_url(ORGANISATION, cluster), gitea_tools.ADMIN_USER, server.token,
                          path=f"./{demo.flux_path()}", interval=INTERVAL)
    except Exception:
        demo.stop()
        raise
    say(f"GitOps: Gitea on {server.url}, Flux applying {demo.repository_url} ({demo.flux_path()}).")
    return demo
