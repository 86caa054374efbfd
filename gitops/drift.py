"""Drift (Celery, every ``GITOPS_DRIFT_SECONDS``): where an object in ``git`` mode differs in the
cluster from its file in Git (a ``kubectl edit``, a controller, a file nobody applied), with the
differences field by field. Objects with a change on its way (not ``Synced``) are left out: they
differ from Git by design until their pull request is applied.

Git is read a folder at a time, not a file at a time: for each change mode, the tree of the folder
all its objects' files share (``Forge.files_under``: two calls, more only for trees over a thousand
files) gives every file's blob sha, and a blob's text is read once (``Forge.blob_text`` keeps it),
so a round in which no file changed costs two calls per change mode whatever its number of objects;
what it found is written in one statement.
"""

from __future__ import annotations

import logging
import posixpath

from django.utils import timezone

from clusters.kinds import all_models
from clusters.kube.client import GatewayError
from clusters.models import SyncState
from gitops.forge import forge_for
from gitops.manifests import differences, parse
from gitops.models import ChangeMode, GitFile
from gitops.scopes import objects_in, path_for

logger = logging.getLogger(__name__)

# The one difference of an object Git has no (readable) file for.
NOT_IN_GIT = {"path": "(file)", "git": None, "cluster": "the object exists in the cluster only"}


def check_drift() -> int:
    """Compare every synced object in ``git`` mode with its file; returns how many have drifted."""
    drifted = 0
    for mode in ChangeMode.objects.filter(mode=ChangeMode.Mode.GIT).select_related("cluster"):
        try:
            drifted += _check(mode)
        except GatewayError as error:  # the forge is away: the next round checks again
            logger.warning("drift of %s: %s", mode, error)
    return drifted


def _check(mode: ChangeMode) -> int:
    rows = [(model, row, path_for(mode, row)) for model in all_models()
            for row in objects_in(mode, model).filter(sync_state=SyncState.SYNCED)]  # fmt: skip
    if not rows:
        return 0
    forge = forge_for(mode)
    in_git = forge.files_under(_folder_of([path for _, _, path in rows]), mode.branch)
    checked, now = [], timezone.now()
    for model, row, path in rows:
        sha = in_git.get(path, "")
        manifest = parse(forge.blob_text(sha)) if sha else None
        drift = differences(model, manifest, row.to_manifest()) if manifest else [NOT_IN_GIT]
        checked.append(GitFile(kind=model.kube.kind, object_id=row.pk, cluster_id=row.cluster_id, path=path,
                               blob_sha=sha, drift=drift, checked_at=now))  # fmt: skip
    # one statement for the round, whatever its number of objects (an upsert: the follower may have
    # written an object's file meanwhile)
    GitFile.objects.bulk_create(checked, update_conflicts=True, unique_fields=["kind", "object_id"],
                                update_fields=["cluster", "path", "blob_sha", "drift", "checked_at"])  # fmt: skip
    return sum(bool(known.drift) for known in checked)


def _folder_of(paths: list[str]) -> str:
    """The deepest folder holding every one of ``paths`` ('' the repository's root)."""
    return posixpath.commonpath([posixpath.dirname(path) for path in paths])
