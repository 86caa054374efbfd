"""Who a wrong password counts against: one rule for the login form, the admin's login and
``POST /api/token/`` (described once, in docs/identity.md, "Failed logins").

- **Per person, per device.** From a known device of the person named (``accounts.devices``: a
  browser or CLI that signed in as them before), the attempt counts against that device alone
  and no other count refuses it. From anywhere else it counts against the person's count for
  unknown devices. So guessing someone's password locks out only strangers to their account,
  never their own devices, and never anyone else.
- **Per address, only where the address is a client's**: ``TRUSTED_PROXIES`` configured and the
  address the walk finds is not a trusted proxy's (``accounts.client_address.client_address``).
  Without trusted proxies the connecting address may be the ingress everyone shares: counting it
  would let one person's wrong passwords lock out everyone else, so it is not counted.
- **Only passwords count.** An attempt that names no user (single sign-on's callback: the
  provider checks the password) neither counts nor is refused by either count.

django-axes keeps the counts and refuses (its ``AXES_LOCKOUT_PARAMETERS`` and
``AXES_WHITELIST_CALLABLE`` are the two functions here); DRF's throttle of ``POST /api/token/``
takes the same keys (:class:`PersonThrottle`, :class:`AddressThrottle`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from rest_framework.request import Request
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from accounts.client_address import client_address
from accounts.devices import known_device


def _username(credentials: Mapping[str, Any] | None) -> str | None:
    """The user name as the password check reads it: DRF's CharField takes numbers as text and
    trims spaces, so ``" vera "`` and ``"vera"`` are one person for the counts too."""
    value = (credentials or {}).get(get_user_model().USERNAME_FIELD)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    return str(value).strip() or None


def passes_lockout(request: Any, credentials: dict | None) -> bool:
    """``AXES_WHITELIST_CALLABLE``: neither count applies (no user named, or a known device of the
    named person, whose wrong passwords ``accounts.devices`` counts against the device)."""
    username = _username(credentials)
    return username is None or known_device(request, username) is not None


def lockout_parameters(request_or_attempt: Any, credentials: dict | None = None) -> list[str]:
    """``AXES_LOCKOUT_PARAMETERS``: the person's count, and the address's where it is a client's."""
    if not hasattr(request_or_attempt, "META"):  # a stored attempt (axes' cache keys): no request to walk
        return ["username", "ip_address"] if settings.TRUSTED_PROXIES else ["username"]
    return ["username", "ip_address"] if client_address(request_or_attempt) else ["username"]


class PersonThrottle(ScopedRateThrottle):
    """``POST /api/token/`` per person named: per device from a known device of theirs, else their
    count for unknown devices (a request naming nobody is refused by validation, not counted)."""

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        data = request.data if isinstance(request.data, Mapping) else {}
        username = _username(data)
        if username is None:
            return None
        device = known_device(request, username)
        ident = f"device:{device.pk}" if device else "person:" + hashlib.sha256(username.encode()).hexdigest()
        return self.cache_format % {"scope": self.scope, "ident": ident}


class AddressThrottle(ScopedRateThrottle):
    """``POST /api/token/`` per client address, only where it is a client's (DRF's own throttle
    believes any ``X-Forwarded-For`` and counts a shared ingress as one client)."""

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        address = client_address(request)
        if address is None or passes_lockout(request, request.data if isinstance(request.data, Mapping) else None):
            return None
        return self.cache_format % {"scope": self.scope, "ident": f"address:{address}"}
