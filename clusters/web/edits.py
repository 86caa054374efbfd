"""Whether a portal edit may be saved over the stored row: no silent revert, no edit of a deleting object.

An edit is made from a copy of the row (a page, a form, an API response). Saving it writes the
whole copy back, so if the row changed since (the cluster changed a field, another person saved,
the object was deleted), saving would undo those changes without anyone seeing them. Every edit
therefore names the :meth:`~clusters.models.KubeObject.edit_version` of its copy, and is checked
here under the row's lock, in the same transaction as the save: a copy of another version is
refused with the differences, which the API answers with 409 and the pages and the admin show
on the form. A delete in progress is never cancelled by an edit.
"""

from __future__ import annotations

from typing import Any

from clusters.models import KubeObject, SyncState
from clusters.sync.audit import json_diff
from clusters.validation.schemas import FieldError, ManifestInvalid

VERSION_PATH = "metadata.resourceVersion"


class EditRefused(ManifestInvalid):
    """An edit that must not be saved over the stored row (the API answers 409 Conflict)."""

    state: str

    def as_dict(self) -> dict[str, Any]:
        """The API's 409 body."""
        return {"detail": self.errors[0].message, "state": self.state}


class StaleCopy(EditRefused):
    """The edit was made from an older copy: saving it would revert what changed since."""

    def __init__(self, stored: KubeObject, given: str, submitted: dict[str, Any]) -> None:
        self.current = stored.edit_version()
        self.given = given
        self.state = stored.sync_state
        # Where the edit differs from the row now: the person's own changes and what changed since.
        self.differences = [
            {"path": change["path"], "current": change["old"], "yours": change["new"]}
            for change in json_diff(stored.desired_document(), submitted)
        ]
        rule = (
            f"is not the current version {self.current!r} of {stored.kube.kind} {stored}: it changed since "
            f"you opened it (now {stored.sync_state}); review the differences and save again from the current version"
        )
        super().__init__([FieldError(VERSION_PATH, given, rule)])

    def as_dict(self) -> dict[str, Any]:
        """Both versions and each field where the edit and the row differ."""
        return {
            **super().as_dict(),
            "resourceVersion": {"current": self.current, "given": self.given},
            "fields": self.differences,
        }


class ObjectDeleting(EditRefused):
    """The object is being deleted: an edit would cancel the delete, so it is refused."""

    def __init__(self, stored: KubeObject) -> None:
        self.state = stored.sync_state
        rule = "is being deleted in the cluster (Deleting): it cannot be edited; create it again once it is gone"
        super().__init__([FieldError("sync_state", stored.sync_state, rule)])


def lock_for_edit(
    model: type[KubeObject], pk: int | None, made_from: str | None, submitted: dict[str, Any]
) -> KubeObject | None:
    """Lock and return the stored row an edit is about to replace (None for a new object).

    Raises :class:`ObjectDeleting` for a row being deleted and :class:`StaleCopy` when
    ``made_from`` (the edit's copy's version) is not the row's current version. ``made_from`` is
    None only where no copy is involved: the caller built the edit from this same locked row, or
    states the whole object declaratively (``/api/apply/`` of a manifest without resourceVersion).
    Must run inside a transaction, which holds the lock until the edit is saved.
    """
    if pk is None:
        return None
    stored = model.objects.select_for_update(of=("self",)).select_related("cluster").get(pk=pk)
    if stored.sync_state == SyncState.DELETING:
        raise ObjectDeleting(stored)
    if made_from is not None and made_from != stored.edit_version():
        raise StaleCopy(stored, made_from, submitted)
    return stored
