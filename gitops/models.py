"""Where changes go (the change mode per cluster or namespace) and what the portal follows in Git.

``ChangeMode`` says, for a whole cluster (``namespace`` empty) or one namespace of it, whether a
portal edit is applied to the cluster (``direct``) or proposed as a pull request (``git``), and
where in which repository. ``ProposedChange`` is one pull request the portal opened for one
person's edits of one object; ``GitFile`` is what the portal last read of an object's file in Git
(its blob sha, and how the cluster differs from it: drift).
"""

from __future__ import annotations

import re
from typing import ClassVar
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from encrypted_fields.fields import EncryptedTextField

from clusters.json_columns import JSONField
from clusters.kinds import all_models
from clusters.models import Cluster
from clusters.url_rules import redact_url, validate_http_url
from clusters.validation.metadata_rules import DNS1123_LABEL

DEFAULT_LAYOUT = "clusters/<cluster>/<namespace>/<kind>/<name>.yaml"
PLACEHOLDERS = ("<cluster>", "<namespace>", "<kind>", "<name>")
# What a layout may hold besides its placeholders: plain path characters, so that a layout can
# never climb out of the repository or reach another namespace's files by a trick of the path.
_LAYOUT_TEXT = re.compile(r"[A-Za-z0-9._/-]*")
# owner/name of a repository, as both forges spell them.
_REPOSITORY_PATH = re.compile(r"/(?P<owner>[A-Za-z0-9_.-]+)/(?P<name>[A-Za-z0-9_.-]+?)(?:\.git)?/?")
_BRANCH = re.compile(r"[A-Za-z0-9._/-]{1,200}")


class ChangeMode(models.Model):
    """How portal edits reach one cluster, or one namespace of it (a namespace's row wins).

    The token is write-only everywhere and encrypted at rest exactly as the clusters' credentials
    are (``EncryptedTextField``: Fernet, keys from ``SECRET_KEY`` and ``FIELD_ENCRYPTION_KEYS``).
    """

    # The URL and the credential sent to it: a changed URL needs the token given again (as Cluster).
    CREDENTIAL_FOR_URL: ClassVar[dict[str, str]] = {"repository_url": "token"}

    class Mode(models.TextChoices):
        DIRECT = "direct", "Direct: edits are applied to the cluster"
        GIT = "git", "Git: edits become pull requests"

    class Forge(models.TextChoices):
        GITEA = "gitea", "Gitea (or Forgejo)"
        GITHUB = "github", "GitHub"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    namespace = models.CharField(
        max_length=63, blank=True, help_text="Empty: the whole cluster; a namespace's own row overrides it."
    )
    mode = models.CharField(max_length=8, choices=Mode.choices, default=Mode.DIRECT)
    forge = models.CharField(max_length=8, choices=Forge.choices, default=Forge.GITEA)
    repository_url = models.CharField(
        max_length=2048,
        blank=True,
        validators=[validate_http_url],
        help_text="The repository's web address, e.g. https://gitea.example.com/platform/clusters.",
    )
    branch = models.CharField(max_length=200, default="main", help_text="The branch the GitOps engine applies.")
    path_layout = models.CharField(
        max_length=500,
        default=DEFAULT_LAYOUT,
        help_text="Where an object's file lives; placeholders " + ", ".join(PLACEHOLDERS) + ".",
    )
    kind_layouts = JSONField(
        default=dict, blank=True, help_text="Per kind, a layout replacing path_layout (e.g. {\"Model\": \"...\"})."
    )
    token = EncryptedTextField(blank=True, null=True, help_text="Never shown back once saved; encrypted at rest.")
    allow_insecure_http = models.BooleanField(
        default=False, help_text="Staff only: let repository_url be plain http://, sending the token unencrypted."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster__name", "namespace"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "namespace"], name="gitops_one_mode_per_scope"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.namespace or '*'}: {self.mode}"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.namespace and not (len(self.namespace) <= 63 and DNS1123_LABEL.fullmatch(self.namespace)):
            errors["namespace"] = f"{self.namespace!r} must be a namespace name (an RFC 1123 label) or empty"
        if not _BRANCH.fullmatch(self.branch or "") or ".." in self.branch:
            errors["branch"] = f"{self.branch!r} must be a branch name (letters, digits, . _ / -, no '..')"
        for field, layouts in [("path_layout", {"": self.path_layout}), ("kind_layouts", self.kind_layouts)]:
            problem = _layouts_errors(layouts, needs_kind=field == "path_layout")
            if problem:
                errors[field] = problem
        if self.mode == self.Mode.GIT:
            if not self.repository_url:
                errors["repository_url"] = "is required when mode is git"
            elif _REPOSITORY_PATH.fullmatch(urlsplit(self.repository_url).path) is None:
                errors["repository_url"] = (
                    f"{redact_url(self.repository_url)!r} must name a repository as <forge address>/<owner>/<name>"
                )
            elif urlsplit(self.repository_url).scheme == "http" and not self.allow_insecure_http:
                errors["repository_url"] = (
                    f"{redact_url(self.repository_url)!r} must be https://, as the token is sent to it "
                    "(staff may set allow_insecure_http to allow plain http)"
                )
            if not self.token:
                errors["token"] = "is required when mode is git (the portal opens pull requests with it)"
        if errors:
            raise ValidationError(errors)

    def layout_for(self, kind: str) -> str:
        return (self.kind_layouts or {}).get(kind) or self.path_layout

    def repository(self) -> tuple[str, str, str]:
        """(forge base address, owner, name) of ``repository_url``."""
        parts = urlsplit(self.repository_url)
        found = _REPOSITORY_PATH.fullmatch(parts.path)
        if found is None:
            raise ValueError(f"{redact_url(self.repository_url)!r} names no repository")
        return f"{parts.scheme}://{parts.netloc}", found["owner"], found["name"]

    def moved_credential_errors(self, stored: ChangeMode, supplied: set[str]) -> dict[str, str]:
        """A changed repository URL with the stored token kept: refused, as for clusters (the token is
        never sent to a new address someone typed in)."""
        return Cluster.moved_credential_errors(self, stored, supplied)  # type: ignore[arg-type]


def _layouts_errors(layouts: object, *, needs_kind: bool) -> str:
    """Why a layout (or a map of them by kind) is unusable, or ''."""
    if not isinstance(layouts, dict) or not all(isinstance(value, str) for value in layouts.values()):
        return f"{layouts!r} must map kinds to layouts (strings)"
    known = {model.kube.kind for model in all_models()}
    for kind, layout in layouts.items():
        if kind and kind not in known:
            return f"{kind!r} is not a mirrored kind; known: {', '.join(sorted(known))}"
        needed = ["<namespace>", "<name>", *(["<kind>"] if needs_kind else [])]
        missing = [placeholder for placeholder in needed if placeholder not in layout]
        text = layout
        for placeholder in PLACEHOLDERS:
            text = text.replace(placeholder, "")
        if missing:
            return f"{layout!r} must contain {', '.join(missing)} (one file per object, each namespace apart)"
        if not _LAYOUT_TEXT.fullmatch(text) or layout.startswith("/") or ".." in layout.split("/"):
            return f"{layout!r} must be a relative path of letters, digits, . _ / - and the placeholders"
        if not layout.endswith((".yaml", ".yml")):
            return f"{layout!r} must end in .yaml or .yml"
    return ""


class ProposedChange(models.Model):
    """One pull request opened by the portal for one person's edits of one object (all of them,
    until it is merged or closed: the same branch, one commit per edit)."""

    class State(models.TextChoices):
        OPEN = "open", "Open: waiting for review"
        MERGED = "merged", "Merged: waiting for the cluster"
        APPLIED = "applied", "Applied in the cluster"
        CLOSED = "closed", "Closed without merging: dropped"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=64)
    object_id = models.BigIntegerField()
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    author_label = models.CharField(max_length=255)
    path = models.CharField(max_length=1024)
    branch = models.CharField(max_length=255)
    base_branch = models.CharField(max_length=200)
    base_blob_sha = models.CharField(
        max_length=64, blank=True, help_text="The file's blob in the base branch when the change began ('' absent)."
    )
    number = models.PositiveIntegerField(null=True, blank=True)
    url = models.CharField(max_length=2048, blank=True)
    manifest = JSONField(null=True, blank=True, help_text="The manifest written to Git; null: the file is deleted.")
    diff = models.TextField(blank=True, help_text="Unified diff of the file against the base branch.")
    state = models.CharField(max_length=8, choices=State.choices, default=State.OPEN, db_index=True)
    merge_commit = models.CharField(max_length=64, blank=True)
    opened_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    merged_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True, help_text="Applied or closed.")

    class Meta:
        ordering = ["-opened_at", "-id"]
        indexes = [models.Index(fields=["kind", "object_id"], name="gitops_change_by_object")]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "object_id", "author"],
                condition=models.Q(state="open"),
                name="gitops_one_open_change_per_person_and_object",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name} #{self.number or '-'} ({self.state})"


class GitFile(models.Model):
    """What the portal last read of one object's file in Git, and where the cluster differs from it."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=64)
    object_id = models.BigIntegerField()
    path = models.CharField(max_length=1024)
    blob_sha = models.CharField(max_length=64, blank=True, help_text="'' when the file does not exist.")
    drift = JSONField(default=list, blank=True, help_text="[{path, git, cluster}] where the cluster differs.")
    checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "object_id"], name="gitops_one_file_per_object")]

    def __str__(self) -> str:
        return f"{self.kind} {self.object_id}: {self.path}@{self.blob_sha[:8]}"
