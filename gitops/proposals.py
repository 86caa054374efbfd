"""Proposing a row's intent as a pull request: the portal's write, in ``git`` mode.

Called by the apply of a row (``clusters.sync.outbound``, through ``clusters.change_routes``), the
one place every write path ends. The change is made for the person behind the row's newest edit:
their edits of one object before it merges go to one branch and one pull request, a commit each.

Nothing is ever silently overwritten in Git: a change starts from the blob of the object's file
that the portal last knew (``GitFile``; a newer file the cluster already holds is what the edit was
made from, so it passes), and each later commit from the blob the change began with
(``ProposedChange.base_blob_sha``); a file that moved on in the base branch meanwhile refuses the
edit with a message naming the file and both blobs (the row shows it as its error).

What the portal knows is not asked of the forge again (each call is a round trip, and Gitea's work
per pull request is most of its cost: docs/gitops.md): a new object's file, which the portal knows
of none, is created by the commit that makes its branch, unread; a later commit on a change's
branch starts from the blob the portal last wrote there. Where Git holds something else after all,
the forge refuses the commit (``REFUSED_AS_STALE``) and the file is read and decided on as always.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from accounts.public import CHANGE, DELETE, can_act_in
from clusters.kube.client import PermanentError
from clusters.kube.impersonation import latest_editor
from clusters.models import KubeObject, SyncState
from gitops.forge import REFUSED_AS_STALE, FileInGit, Forge, forge_for
from gitops.manifests import blob_sha, cleaned, git_manifest, parse, render, unified_diff
from gitops.models import ChangeMode, GitFile, ProposedChange
from gitops.scopes import path_for

CONFLICT = 409


def propose(mode: ChangeMode, obj: KubeObject) -> str:
    """Open or update the pull request carrying the row's intent; returns what was done, in words."""
    with transaction.atomic():
        # The row's lock orders this against its edits and against a second apply of it (the sweep):
        # one pull request per person and object, whatever runs at once.
        row = type(obj).objects.select_for_update(of=("self",)).select_related("cluster").get(pk=obj.pk)
        if row.sync_state not in (SyncState.PENDING_APPLY, SyncState.DELETING):
            return "nothing to propose"
        author = latest_editor(row)
        deleting = row.sync_state == SyncState.DELETING
        if author is not None and not can_act_in(author, row.cluster_id, row.namespace, DELETE if deleting else CHANGE):
            raise PermanentError(
                f"{author.get_username()} may not change objects in namespace {row.namespace} of cluster "
                f"{row.cluster.name}: no pull request is opened for them",
                403,
            )
        manifest = None if deleting else git_manifest(type(row), row.desired_document(), row.namespace, row.name)
        return _carry(forge_for(mode), mode, row, author, manifest)


def _carry(forge: Forge, mode: ChangeMode, row: KubeObject, author: object, manifest: dict | None) -> str:
    path = path_for(mode, row)
    text = render(manifest)
    change = ProposedChange.objects.filter(
        kind=row.kube.kind, object_id=row.pk, author=author, state=ProposedChange.State.OPEN
    ).first()
    if change is not None:
        in_base = forge.read_file(path, mode.branch)
        if (in_base.sha if in_base else "") != change.base_blob_sha:
            raise PermanentError(_moved(path, mode.branch, change.base_blob_sha, in_base.sha if in_base else "",
                                        change), CONFLICT)  # fmt: skip
        return _commit_more(forge, change, row, manifest, text, in_base.text if in_base else "")
    merged = ProposedChange.objects.filter(kind=row.kube.kind, object_id=row.pk, state=ProposedChange.State.MERGED)
    if any(earlier.manifest == manifest for earlier in merged):
        return "merged already: waiting for the cluster"  # the sweep's apply again of a row on its way
    known = GitFile.objects.filter(kind=row.kube.kind, object_id=row.pk, path=path).first()
    if manifest is not None and (known is None or not known.blob_sha) and forge.commits_make_branches:
        # The portal knows of no file (a new object): Git's is not read; the commit creates it, and
        # the forge refuses that if a file is there after all, which is then read as below.
        try:
            with transaction.atomic():  # a savepoint: a refused commit takes its change row with it
                change = _begin(mode, row, author, path, base_sha="")
                _write(forge, change, path, text, None, _message(row, manifest), mode.branch)
        except PermanentError as error:
            if error.status not in REFUSED_AS_STALE:
                raise
            change = None
        if change is not None:
            return _open_pull_request(forge, mode, row, change, manifest, text, "")
    in_base = forge.read_file(path, mode.branch)
    base_sha = in_base.sha if in_base else ""
    if known is not None and known.blob_sha != base_sha and not _made_from(row, in_base):
        raise PermanentError(_moved(path, mode.branch, known.blob_sha, base_sha, None), CONFLICT)
    if (in_base.text if in_base else "") == text:
        # Nothing to review (an edit back to what Git holds, say, after a drift): the change is
        # followed as merged, so the row settles once the engine has the cluster match Git again.
        ProposedChange.objects.create(
            cluster_id=row.cluster_id, kind=row.kube.kind, object_id=row.pk, namespace=row.namespace, name=row.name,
            author=author, author_label=_label(author), path=path, branch=mode.branch, base_branch=mode.branch,
            base_blob_sha=base_sha, manifest=manifest, state=ProposedChange.State.MERGED, merged_at=timezone.now(),
        )  # fmt: skip
        return "Git already holds this: waiting for the cluster"
    change = _begin(mode, row, author, path, base_sha)
    _write(forge, change, path, text, in_base.sha if in_base else None, _message(row, manifest), mode.branch)
    return _open_pull_request(forge, mode, row, change, manifest, text, in_base.text if in_base else "")


def _begin(mode: ChangeMode, row: KubeObject, author: object, path: str, base_sha: str) -> ProposedChange:
    """A new change of ``author``'s, with its branch named (its id makes the name unique)."""
    change = ProposedChange.objects.create(
        cluster_id=row.cluster_id, kind=row.kube.kind, object_id=row.pk, namespace=row.namespace, name=row.name,
        author=author, author_label=_label(author), path=path, branch="pending",
        base_branch=mode.branch, base_blob_sha=base_sha,
    )  # fmt: skip
    who = slugify(change.author_label) or "portal"
    change.branch = f"portal/{who}/{row.namespace}-{row.kube.kind.lower()}-{row.name}-{change.pk}"
    return change


def _open_pull_request(forge: Forge, mode: ChangeMode, row: KubeObject, change: ProposedChange,
                       manifest: dict | None, text: str, base_text: str) -> str:
    """The pull request of a change whose first commit is on its branch."""
    opened = forge.open_pull_request(change.branch, mode.branch, _title(row, manifest), _body(change))
    change.number, change.url = opened.number, opened.url
    _keep(change, manifest, text, base_text)
    return f"opened pull request #{opened.number}"


def _made_from(row: KubeObject, in_base: FileInGit | None) -> bool:
    """Whether Git's file is what the edit was made from (the state the row and the cluster last
    agreed on): a file that moved on since the portal last read it, and that the cluster already
    holds (the engine applied it, the watcher brought it to the row), is no conflict."""
    base = row.base_document()
    found = parse(in_base.text) if in_base else None
    if base is None or found is None:
        return False
    model = type(row)
    return cleaned(model, found, row.namespace, row.name) == git_manifest(model, base, row.namespace, row.name)


def _label(author: object) -> str:
    return author.get_username() if author is not None else "portal"


def _commit_more(forge: Forge, change: ProposedChange, row: KubeObject, manifest: dict | None, text: str,
                 base_text: str) -> str:
    """Another edit of the same person: one more commit on the change's branch (none if unchanged).
    The branch holds what the portal last wrote there (``change.manifest``): it is not read back,
    unless the forge refuses the commit because someone else committed to the branch since."""
    written = render(change.manifest)
    if written == text:
        return f"pull request #{change.number} already holds this"
    try:
        _write(forge, change, change.path, text, blob_sha(written) if written else None, _message(row, manifest))
    except PermanentError as error:
        if error.status not in REFUSED_AS_STALE:
            raise
        on_branch = forge.read_file(change.path, change.branch)
        if (on_branch.text if on_branch else "") == text:
            return f"pull request #{change.number} already holds this"
        _write(forge, change, change.path, text, on_branch.sha if on_branch else None, _message(row, manifest))
    _keep(change, manifest, text, base_text)
    return f"updated pull request #{change.number}"


def _write(forge: Forge, change: ProposedChange, path: str, text: str, sha: str | None, message: str,
           start_from: str | None = None) -> None:
    """One commit on the change's branch (made from ``start_from`` first, for a new change)."""
    if text:
        forge.write_file(path, change.branch, text, sha, message, start_from)
    elif sha is not None:
        forge.delete_file(path, change.branch, sha, message, start_from)


def _keep(change: ProposedChange, manifest: dict | None, text: str, base_text: str) -> None:
    change.manifest = manifest
    change.diff = unified_diff(change.path, base_text, text)
    change.save()


def _moved(path: str, branch: str, began: str, now: str, change: ProposedChange | None) -> str:
    """The refusal of an edit whose file changed in Git behind the portal's back."""
    def blob(sha: str) -> str:
        return sha[:12] if sha else "none"

    where = f"pull request #{change.number}" if change else "this edit"
    return (
        f"{path} changed in Git's {branch} since {where} began (blob {blob(began)}, now {blob(now)}): the edit was "
        "refused so as not to overwrite that change; "
        + ("close the pull request and edit again" if change else "edit again once the portal has read Git's file")
    )


def _title(row: KubeObject, manifest: dict | None) -> str:
    verb = "Delete" if manifest is None else "Change"
    return f"{verb} {row.kube.kind} {row.namespace}/{row.name} (cluster {row.cluster.name})"


def _message(row: KubeObject, manifest: dict | None) -> str:
    return f"{'delete' if manifest is None else 'update'} {row.kube.kind} {row.namespace}/{row.name}"


def _body(change: ProposedChange) -> str:
    return (
        f"Proposed in the Inference Portal by {change.author_label}, whose further edits of this object "
        "before it merges are added to this pull request."
    )
