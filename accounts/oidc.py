"""Single sign-on (OpenID Connect, mozilla-django-oidc): who the provider says signs in, and the
teams and roles their groups claim gives them, brought in step at every login.

mozilla-django-oidc was chosen over django-allauth: it is one authentication backend and two views
(authorization-code flow with PKCE, ID token verified against the provider's JWKS), with nothing
else to install or migrate; allauth brings its own account model, templates, e-mail flows and
sites framework, none of which the portal needs beside its local break-glass accounts.
"""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from functools import cache
from typing import Any

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from django.db import connections, router, transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from accounts.models import ExternalIdentity, GroupMapping

log = logging.getLogger(__name__)
FAILURE = "sso_failure"  # the request attribute saying why a sign-in failed, for the callback's page
RESERVED_PREFIXES = ("system:",)  # Kubernetes' own users and groups (system:kube-controller-manager, ...)
_NOT_IN_A_NAME = re.compile(r"[^a-z0-9._@+-]+")


class NameRefused(SuspiciousOperation):
    """The provider's user name is reserved: the person is not signed in (403, saying why)."""


def portal_username(provider_name: str) -> str:
    """The portal user name of a provider's ``preferred_username`` (docs/identity.md, "Single
    sign-on"): NFKC-normalized and lower-cased, every run of characters outside ``a-z 0-9 . _ @ + -``
    (Django's user name characters, ASCII) replaced by one ``-``, ``-`` and ``.`` trimmed from the
    ends, at most 120 characters. A name that is reserved once normalized and lower-cased
    (``system:``...) raises :class:`NameRefused`; one with nothing left is ``""``.

    The name is what a cluster that impersonates people sees (after ``IMPERSONATE_OIDC_USER_PREFIX``),
    so a provider's ``system:kube-controller-manager`` must never become a portal user of that name.
    """
    folded = unicodedata.normalize("NFKC", provider_name).casefold().strip()
    if folded.startswith(RESERVED_PREFIXES):
        raise NameRefused(f"the provider's user name {provider_name!r} is reserved ({folded.split(':')[0]}: names "
                          "belong to Kubernetes); ask the provider's administrators for another")
    return _NOT_IN_A_NAME.sub("-", folded).strip("-.")[:120]


def sync_memberships(user: Any, groups: list[str]) -> None:
    """Teams and roles named in any :class:`GroupMapping` follow ``groups``; others stay as they are."""
    mappings = list(GroupMapping.objects.all())
    present = set(groups)
    managed_teams = {m.team_id for m in mappings if m.team_id}
    managed_roles = {m.role_id for m in mappings if m.role_id}
    wanted_teams = {m.team_id for m in mappings if m.team_id and m.group in present}
    wanted_roles = {m.role_id for m in mappings if m.role_id and m.group in present}
    user.teams.remove(*(managed_teams - wanted_teams))
    user.teams.add(*wanted_teams)
    user.groups.remove(*(managed_roles - wanted_roles))
    user.groups.add(*wanted_roles)


def _groups(claims: dict[str, Any]) -> list[str]:
    value = claims.get(settings.OIDC_GROUPS_CLAIM) or []
    return [str(group) for group in value] if isinstance(value, list) else [str(value)]


class PortalOIDCBackend(OIDCAuthenticationBackend):
    """Users are linked by the provider's issuer and subject (:class:`ExternalIdentity`), never by
    e-mail or name; a new one gets the provider's preferred user name when it is free."""

    def authenticate(self, request: Any, **kwargs: Any) -> Any:
        """The signed-in person, or None with the reason on the request (:data:`FAILURE`): a code
        the provider refuses (used twice, expired), a provider that cannot be reached or answers
        nonsense, an ID token that does not verify. Each is the person's failed sign-in (a 4xx
        page, ``accounts.views.PortalOIDCCallbackView``), never a server error."""
        if not settings.OIDC_RP_CLIENT_ID:  # single sign-on is not configured
            return None
        try:
            return super().authenticate(request, **kwargs)
        except requests.HTTPError as error:
            answer = _error_of(error.response)
            if error.response is not None and error.response.url == settings.OIDC_OP_TOKEN_ENDPOINT:
                reason = f"the provider refused the sign-in code ({answer}): it was used already or has expired"
            else:
                reason = f"the provider refused to say who signed in ({answer})"
        except requests.RequestException as error:
            reason = f"the provider could not be reached or answered unreadably ({type(error).__name__})"
        except (SuspiciousOperation, ValueError) as error:
            reason = f"the provider's answer did not verify ({error})"
        log.warning("single sign-on failed: %s", reason)
        if request is not None:
            setattr(request, FAILURE, reason)
        return None

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        return bool(claims.get("sub"))

    def filter_users_by_claims(self, claims: dict[str, Any]):
        return self.UserModel.objects.filter(
            external_identity__issuer=settings.OIDC_ISSUER, external_identity__subject=claims["sub"]
        )

    def get_or_create_user(self, access_token: Any, id_token: Any, payload: Any) -> Any:
        """mozilla-django-oidc's, keeping a refused name's reason for the page."""
        try:
            return super().get_or_create_user(access_token, id_token, payload)
        except NameRefused as refused:
            setattr(self.request, FAILURE, str(refused))
            setattr(self.request, f"{FAILURE}_status", 403)
            return None

    def create_user(self, claims: dict[str, Any]) -> Any:
        """A new portal user named after the provider's user name (:func:`portal_username`), with
        a suffix of the subject's digest when a user already has the name or none is left."""
        digest = hashlib.sha256(claims["sub"].encode()).hexdigest()[:8]
        base = portal_username(str(claims.get("preferred_username") or claims["sub"])) or f"user-{digest}"
        username = base
        if get_user_model().objects.filter(username=username).exists():
            username = f"{base}.{digest}"
        with transaction.atomic():
            user = get_user_model().objects.create_user(username, email=claims.get("email", ""))
            user.set_unusable_password()
            user.save(update_fields=["password"])
            ExternalIdentity.objects.create(user=user, issuer=settings.OIDC_ISSUER, subject=claims["sub"])
        return self.update_user(user, claims)

    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        user.email = claims.get("email", user.email)
        user.first_name = str(claims.get("given_name", user.first_name))[:150]
        user.last_name = str(claims.get("family_name", user.last_name))[:150]
        user.save(update_fields=["email", "first_name", "last_name"])
        sync_memberships(user, _groups(claims))
        return user


def _error_of(response: requests.Response | None) -> str:
    """The token endpoint's OAuth error (RFC 6749 5.2), or its HTTP status."""
    if response is None:
        return "no answer"
    try:
        body = response.json()
    except ValueError:
        body = {}
    if isinstance(body, dict) and body.get("error"):
        return f"{body['error']}: {body.get('error_description', '')}".strip(": ")[:200]
    return f"HTTP {response.status_code}"


class LocalAccountBackend(ModelBackend):
    """Passwords of local accounts, unless ``LOCAL_ACCOUNTS`` is off (single sign-on only); the
    permissions of every user still come from here."""

    def authenticate(self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any):
        if not settings.LOCAL_ACCOUNTS:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)

    def get_user(self, user_id: Any) -> Any:
        """The signed-in user of a request's session, as ModelBackend reads them (the row with that
        primary key, if it may sign in), in the one statement the read is.

        Every signed-in request reads its user: building and compiling ModelBackend's
        ``_default_manager.get(pk=...)`` QuerySet was most of its 0.46-0.50 ms of the worker's CPU
        (the API list, page and API call alike); the same row read by ``raw()``, which converts its
        values and builds the instance as the ORM does, takes 0.28-0.30. A key no row has is no user."""
        model = get_user_model()
        key = model._meta.pk.get_prep_value(user_id)
        user = next(iter(model._default_manager.raw(_user_by_key_sql(model), [key])), None)
        return user if user is not None and self.user_can_authenticate(user) else None


@cache
def _user_by_key_sql(model: type[Any]) -> str:
    """Every column of ``model``'s row with the primary key ``%s``."""
    quote = connections[router.db_for_read(model)].ops.quote_name
    columns = ", ".join(quote(field.column) for field in model._meta.concrete_fields)
    return f"SELECT {columns} FROM {quote(model._meta.db_table)} WHERE {quote(model._meta.pk.column)} = %s"
