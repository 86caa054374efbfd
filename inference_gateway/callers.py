"""Who is calling: the portal's API tokens (django-rest-knox), checked once per ``caller_ttl``.

A token is verified exactly as the REST API verifies it (``knox.auth.TokenAuthentication``:
digest, expiry, active user), and the caller's namespaces come from ``accounts.access``, the rule
every page and endpoint applies. Both need the database, so a verified token is remembered (by
the SHA-256 of the key, never the key) for ``caller_ttl`` seconds, never past the token's expiry:
a revoked token, a deactivated user or a changed team grant takes effect within that, and the
request path does no query per request. OpenAI clients send ``Authorization: Bearer <key>``; the
REST API's ``Token <key>`` is accepted too.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.utils import timezone
from knox.auth import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from accounts.access import VIEW, namespace_predicate
from inference_gateway.db_thread import in_thread

PREFIXES = ("Bearer ", "Token ")
MAX_REMEMBERED = 10_000  # tokens; past it, expired entries are dropped before adding one


class NotAuthenticated(Exception):
    """No key, or one the portal does not accept; the message says which."""


@dataclass(frozen=True)
class Caller:
    user_id: int
    username: str
    visible: Callable[[int, str], bool]


def key_from_header(header: str | None) -> str:
    for prefix in PREFIXES:
        if header and header.startswith(prefix):
            return header[len(prefix):].strip()
    raise NotAuthenticated("no API key: send 'Authorization: Bearer <portal API token>'")


def verify(key: str) -> tuple[Caller, float]:
    """The token's caller and until when (Unix time) the token is valid; raises NotAuthenticated."""
    try:
        user, token = TokenAuthentication().authenticate_credentials(key.encode())
    except AuthenticationFailed as error:
        raise NotAuthenticated(f"invalid API key: {error.detail}") from None
    expires = token.expiry.timestamp() if token.expiry else float("inf")
    return Caller(user.pk, user.get_username(), namespace_predicate(user, VIEW)), expires


class Callers:
    """Verified tokens, remembered for ``ttl`` seconds."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._known: dict[str, tuple[Caller, float]] = {}

    async def caller(self, header: str | None) -> Caller:
        key = key_from_header(header)
        digest = hashlib.sha256(key.encode()).hexdigest()
        known = self._known.get(digest)
        if known is not None and time.monotonic() < known[1]:
            return known[0]
        caller, expires = await in_thread(lambda: verify(key))
        valid_for = min(self.ttl, expires - timezone.now().timestamp())
        if len(self._known) >= MAX_REMEMBERED:
            now = time.monotonic()
            self._known = {known: entry for known, entry in self._known.items() if entry[1] > now}
        self._known[digest] = (caller, time.monotonic() + valid_for)
        return caller
