"""Who is calling: the portal's API tokens (django-rest-knox), checked once per ``caller_ttl``.

A token is verified exactly as the REST API verifies it (``knox.auth.TokenAuthentication``:
digest, expiry, active user), and the caller's namespaces come from ``accounts.access``, the rule
every page and endpoint applies. Both need the database, so a verified token is remembered (by
the SHA-256 of the key, never the key) for ``caller_ttl`` seconds, never past the token's expiry:
a revoked token, a deactivated user or a changed team grant takes effect within that, and the
request path does no query per request. OpenAI clients send ``Authorization: Bearer <key>``; the
REST API's ``Token <key>`` is accepted too.

**No request waits for a check once its token is known.** One check per token runs at a time,
however many requests carry it (they all await that one); and a remembered caller is checked again
in the background by the first request past half its time, while requests go on using the caller,
so under steady traffic a token is re-read every ``caller_ttl / 2`` seconds and never expires in
use. Without that, each expiry sent every request of the next few milliseconds to the database,
each with a check (and a connection) of its own, and held them all for it: latency spikes, and
a quarter of the gateway's CPU at 2,000 requests/s. A failed re-check forgets the caller at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.utils import timezone
from knox.auth import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from accounts.public import VIEW, InvalidAccessToken, looks_like_jwt, namespace_predicate, verify_access_token
from common.db_thread import read

PREFIXES = ("Bearer ", "Token ")
MAX_REMEMBERED = 10_000  # tokens; past it, expired entries are dropped before adding one


class NotAuthenticated(Exception):
    """No key, or one the portal does not accept; the message says which."""


@dataclass(frozen=True)
class Caller:
    """A verified caller. ``token_key`` keys the limits' per-caller counters (``api_token_*``):
    knox's ``token_key`` for an API token, ``person:<user id>`` for an identity provider's access
    token, whose every token of one person is that person (an empty key would put every single
    sign-on caller of a scope on one counter, so one team's person spent another's)."""

    user_id: int
    username: str
    visible: Callable[[int, str], bool]
    token_name: str  # the API token's name, for the usage ledger ("" for an access token)
    token_key: str

    def __post_init__(self) -> None:
        if not self.token_key:
            raise ValueError("a caller's counter key (token_key) must not be empty")


def key_from_header(header: str | None) -> str:
    for prefix in PREFIXES:
        if header and header.startswith(prefix):
            return header[len(prefix):].strip()
    raise NotAuthenticated("no API key: send 'Authorization: Bearer <portal API token>'")


def verify(key: str) -> tuple[Caller, float]:
    """The token's caller and until when (Unix time) the token is valid; raises NotAuthenticated.

    A JWT is an access token of the identity provider (``accounts.access_tokens``), anything else
    a portal API token; either way the caller's namespaces come from the same rule."""
    if looks_like_jwt(key):
        try:
            user, expires = verify_access_token(key)
        except InvalidAccessToken as error:
            raise NotAuthenticated(str(error)) from None
        return Caller(user.pk, user.get_username(), namespace_predicate(user, VIEW), "", f"person:{user.pk}"), expires
    try:
        user, token = TokenAuthentication().authenticate_credentials(key.encode())
    except AuthenticationFailed as error:
        raise NotAuthenticated(f"invalid API key: {error.detail}") from None
    expires = token.expiry.timestamp() if token.expiry else float("inf")
    caller = Caller(user.pk, user.get_username(), namespace_predicate(user, VIEW), getattr(token, "name", ""),
                    token.token_key)
    return caller, expires


@dataclass(frozen=True)
class _Known:
    caller: Caller
    check_again: float  # time.monotonic() from which a request starts a background check
    until: float  # time.monotonic() past which the caller is not used without a check


class Callers:
    """Verified tokens, remembered for ``ttl`` seconds (by the key's digest)."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._known: dict[str, _Known] = {}
        self._checks: dict[str, asyncio.Future[Caller]] = {}

    async def caller(self, header: str | None) -> Caller:
        key = key_from_header(header)
        digest = hashlib.sha256(key.encode()).hexdigest()
        known = self._known.get(digest)
        now = time.monotonic()
        if known is not None and now < known.until:
            if now >= known.check_again:
                self._check(digest, key)
            return known.caller
        return await asyncio.shield(self._check(digest, key))

    def _check(self, digest: str, key: str) -> asyncio.Future[Caller]:
        """The check of this token under way, or a new one."""
        check = self._checks.get(digest)
        if check is None:
            check = self._checks[digest] = asyncio.ensure_future(self._verify(digest, key))
            check.add_done_callback(lambda _: self._checks.pop(digest, None))
            check.add_done_callback(_retrieve_outcome)
        return check

    async def _verify(self, digest: str, key: str) -> Caller:
        try:
            caller, expires = await read(lambda: verify(key))
        except NotAuthenticated:
            self._known.pop(digest, None)
            raise
        valid_for = min(self.ttl, expires - timezone.now().timestamp())
        now = time.monotonic()
        if len(self._known) >= MAX_REMEMBERED:
            self._known = {known: entry for known, entry in self._known.items() if entry.until > now}
        self._known[digest] = _Known(caller, now + valid_for / 2, now + valid_for)
        return caller


def _retrieve_outcome(check: asyncio.Future) -> None:
    """A background re-check's outcome is in the table (or its absence) and nobody awaits it:
    retrieving its exception keeps asyncio from logging it as never retrieved."""
    if not check.cancelled():
        check.exception()
