"""The change route gitops registers with clusters/ (``clusters.change_routes``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from clusters.models import KubeObject
from gitops.models import ChangeMode, GitFile, ProposedChange
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
        return self.describe_many([obj])[(obj.kube.kind, obj.pk)]

    def describe_many(self, objs: Iterable[KubeObject]) -> dict[tuple[str, int], dict[str, Any] | None]:
        """``sync.gitops`` of each object, by (kind, id), None in direct mode: what the API and the
        page's GitOps panel show. Three queries whatever the number of objects (one in direct mode),
        so an API page of them costs the same at any size."""
        objs = list(objs)
        scopes = ChangeMode.objects.filter(cluster_id__in={obj.cluster_id for obj in objs}).select_related("cluster")
        modes = {(mode.cluster_id, mode.namespace): mode for mode in scopes}
        in_git_mode = {}
        for obj in objs:
            mode = modes.get((obj.cluster_id, obj.namespace)) or modes.get((obj.cluster_id, ""))
            if mode is not None and mode.mode == ChangeMode.Mode.GIT:
                in_git_mode[(obj.kube.kind, obj.pk)] = (obj, mode)
        ids = {pk for _, pk in in_git_mode}
        changes: dict[tuple[str, int], list[ProposedChange]] = {}
        files: dict[tuple[str, int], GitFile] = {}
        if ids:
            for change in ProposedChange.objects.filter(object_id__in=ids, state__in=PENDING).order_by("opened_at"):
                changes.setdefault((change.kind, change.object_id), []).append(change)
            files = {(known.kind, known.object_id): known for known in GitFile.objects.filter(object_id__in=ids)}
        described: dict[tuple[str, int], dict[str, Any] | None] = {(obj.kube.kind, obj.pk): None for obj in objs}
        for key, (obj, mode) in in_git_mode.items():
            described[key] = _described(obj, mode, changes.get(key, []), files.get(key))
        return described


def _described(obj: KubeObject, mode: ChangeMode, changes: list[ProposedChange], known: GitFile | None) -> dict:
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
