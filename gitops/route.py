"""The change route gitops registers with clusters/ (``clusters.change_routes``)."""

from __future__ import annotations

from typing import Any

from clusters.models import KubeObject
from gitops.models import GitFile, ProposedChange
from gitops.proposals import propose
from gitops.scopes import in_git, path_for

# What the API and the pages show of a pending change: open, or merged and not yet in the cluster.
PENDING = (ProposedChange.State.OPEN, ProposedChange.State.MERGED)


class GitRoute:
    """In ``git`` mode an object's changes become pull requests; elsewhere they go to the cluster."""

    def diverts(self, obj: KubeObject) -> bool:
        return in_git(obj) is not None

    def propose(self, obj: KubeObject) -> str:
        mode = in_git(obj)
        if mode is None:  # switched back to direct since: the apply goes on as usual on its next round
            return "direct again"
        return propose(mode, obj)

    def describe(self, obj: KubeObject) -> dict[str, Any] | None:
        """``sync.gitops`` in the API and the page's GitOps panel: None in direct mode."""
        mode = in_git(obj)
        if mode is None:
            return None
        changes = ProposedChange.objects.filter(kind=obj.kube.kind, object_id=obj.pk, state__in=PENDING)
        known = GitFile.objects.filter(kind=obj.kube.kind, object_id=obj.pk).first()
        return {
            "mode": mode.mode,
            "repository": mode.repository_url,
            "branch": mode.branch,
            "path": path_for(mode, obj),
            "pending": [
                {
                    "pullRequest": change.number,
                    "url": change.url,
                    "state": change.state,
                    "author": change.author_label,
                    "branch": change.branch,
                    "mergeCommit": change.merge_commit,
                    "diff": change.diff,
                }
                for change in changes
            ],
            "drifted": bool(known and known.drift),
            "drift": known.drift if known else [],
            "driftCheckedAt": known.checked_at if known else None,
        }
