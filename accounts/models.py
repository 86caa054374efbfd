"""Teams own namespaces per cluster; membership decides what a person sees and acts on."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from knox.models import AbstractAuthToken

ALL_NAMESPACES = "*"


class Team(models.Model):
    """A group of people (an ML team) that owns namespaces in one or more clusters."""

    name = models.SlugField(max_length=63, unique=True)
    description = models.CharField(max_length=255, blank=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams", blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class NamespaceGrant(models.Model):
    """One namespace (or ``*``: every namespace) of one cluster (or every cluster) owned by a team.

    ``access`` separates teams that only look (a shared namespace they call) from the owners who
    edit, run and delete there; Django model permissions still decide *what kinds* a user may edit.
    """

    class Access(models.TextChoices):
        VIEW = "view", "View"
        EDIT = "edit", "View and edit"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="grants")
    # by label, not by import: accounts sits below clusters in the apps' layers (docs/architecture.md)
    cluster = models.ForeignKey(
        "clusters.Cluster", null=True, blank=True, on_delete=models.CASCADE, help_text="Empty: every cluster."
    )
    namespace = models.CharField(max_length=63, help_text="A namespace name, or * for every namespace.")
    access = models.CharField(max_length=4, choices=Access.choices, default=Access.EDIT)

    class Meta:
        ordering = ["team__name", "cluster__name", "namespace"]
        constraints = [
            models.UniqueConstraint(fields=["team", "cluster", "namespace"], name="accounts_grant_unique"),
        ]

    def __str__(self) -> str:
        where = self.cluster.name if self.cluster_id else "every cluster"
        return f"{self.team}: {where}/{self.namespace} ({self.access})"


class ApiToken(AbstractAuthToken):
    """An API token (django-rest-knox): only its SHA-512 digest and first characters are stored.

    A person holds several, each named (what uses it) and expiring; the key is shown once, when
    created, and can never be read back from the database.
    """

    name = models.CharField(max_length=64, help_text="What uses this token, e.g. 'ci' or 'laptop'.")

    class Meta:
        ordering = ["-created"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.user}: {self.name}"


class KnownDevice(models.Model):
    """A browser that once signed in as ``user`` with the right password (a signed cookie names it).

    Such a browser still passes the per-account lockout, so wrong passwords typed elsewhere for
    someone never lock them out of their own device. Only a digest of the cookie's secret is
    stored; wrong passwords from the device itself count in ``failures`` and, at the failure
    limit, end it (the browser is then a stranger like any other).
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="known_devices")
    digest = models.CharField(max_length=64, unique=True)
    failures = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)
    last_login = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user}: device since {self.created:%Y-%m-%d}"


class GroupMapping(models.Model):
    """One identity-provider group and what it grants: membership of a team, a role, or both.

    At every single sign-on the person's teams and roles named in any mapping follow their groups
    claim: added when a mapped group is present, removed when it is gone. Teams and roles that no
    mapping names are left as staff set them by hand.
    """

    group = models.CharField(max_length=255, help_text="The group's name as the provider's groups claim spells it.")
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="group_mappings")
    role = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="The permission group (e.g. 'ML team member') the group's members get.",
    )

    class Meta:
        ordering = ["group"]

    def __str__(self) -> str:
        return f"{self.group} -> {self.team or '-'} / {self.role or '-'}"

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        if not self.team_id and not self.role_id:
            raise ValidationError("a mapping grants a team, a role or both: choose at least one")


class ExternalIdentity(models.Model):
    """The provider account (issuer and subject) a portal user signs in as; never matched by e-mail
    or user name, so no provider account can take over a local (break-glass) one."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identity")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="accounts_identity_unique")]
        verbose_name_plural = "external identities"

    def __str__(self) -> str:
        return f"{self.user} = {self.subject}@{self.issuer}"
