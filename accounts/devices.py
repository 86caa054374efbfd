"""Known devices: the part of the lockout that a person's own browser passes.

django-axes counts wrong passwords per person (and per client address, where it is a client's:
``accounts.lockout`` holds the rule). Alone, the person's count lets anyone lock anyone out (type
ten wrong passwords for them). A browser or CLI that signed in as that person before carries a
signed cookie naming a :class:`~accounts.models.KnownDevice`; the lockout lets its attempts
through (``accounts.lockout.passes_lockout``), the password is still checked, and wrong passwords
from it count against the device alone, which is forgotten at the failure limit. Strangers (no
cookie, another person's cookie, a forged or expired one) meet the counts.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.db.models import F
from django.http import HttpRequest, HttpResponse

from accounts.models import KnownDevice

COOKIE = "portal_device"
SALT = "accounts.known-device"
_ISSUED = "_known_device_cookie"  # the request attribute the middleware turns into Set-Cookie


def _max_age() -> int:
    return settings.KNOWN_DEVICE_DAYS * 86400


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _http_request(request: Any) -> Any:
    """The Django request under a DRF ``Request`` (attributes set on the wrapper stay there)."""
    return getattr(request, "_request", request)


def known_device(request: HttpRequest | None, username: str | None) -> KnownDevice | None:
    """The device the request's cookie names, if it is valid and belongs to ``username``."""
    raw = getattr(request, "COOKIES", {}).get(COOKIE) if request is not None else None
    if not raw or not username:
        return None
    try:
        user_pk, secret = signing.loads(raw, salt=SALT, max_age=_max_age())
    except (signing.BadSignature, TypeError, ValueError):
        return None
    username_field = get_user_model().USERNAME_FIELD
    return KnownDevice.objects.filter(
        digest=_digest(str(secret)), user_id=user_pk, **{f"user__{username_field}": username}
    ).first()


def remember_device(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    """``user_logged_in``: a known device starts afresh; any other browser becomes one."""
    if request is None:
        return
    device = known_device(request, user.get_username())
    if device is not None:
        device.failures = 0
        device.save(update_fields=["failures", "last_login"])
        return
    secret = secrets.token_urlsafe(32)
    KnownDevice.objects.create(user=user, digest=_digest(secret))
    stale = KnownDevice.objects.filter(user=user).order_by("-last_login").values_list("pk", flat=True)
    KnownDevice.objects.filter(pk__in=list(stale[settings.KNOWN_DEVICE_LIMIT :])).delete()
    setattr(_http_request(request), _ISSUED, signing.dumps([user.pk, secret], salt=SALT))


def count_device_failure(sender: Any, credentials: dict, request: HttpRequest | None = None, **kwargs: Any) -> None:
    """``user_login_failed``: a wrong password from a known device counts against that device
    (axes does not count it), which is forgotten at the failure limit."""
    device = known_device(request, (credentials or {}).get(get_user_model().USERNAME_FIELD))
    if device is None:
        return
    KnownDevice.objects.filter(pk=device.pk).update(failures=F("failures") + 1)
    KnownDevice.objects.filter(pk=device.pk, failures__gte=settings.AXES_FAILURE_LIMIT).delete()


class KnownDeviceMiddleware:
    """Sets the cookie of a device that has just become known (a signal cannot touch the response)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        issued = getattr(request, _ISSUED, None)
        if issued:
            response.set_cookie(
                COOKIE,
                issued,
                max_age=_max_age(),
                httponly=True,
                secure=settings.SESSION_COOKIE_SECURE,
                samesite="Lax",
            )
        return response
