"""The client's address as the lockout and the login throttle count it.

``X-Forwarded-For`` is honoured hop by hop, right to left, only while the hop that handed the
request on is one of ``TRUSTED_PROXIES`` (addresses or networks, e.g. the ingress's pod range):
the first hop that is not trusted is the client. A client talking to the portal directly, or
through an untrusted hop, cannot choose its address by writing the header itself.

Behind the web process's own nginx (config/web_server.py, ``WEB_LOCAL_PROXY``) every request comes
from loopback; the address that connected to nginx is the one nginx writes in ``X-Real-IP``
(replacing any a client sent), and the walk starts from there. Loopback itself is not trusted for
``X-Forwarded-For``: a client on the pod's own loopback cannot name another address either.

django-ipware (what django-axes offers) was not used: its trusted-proxy list is matched against
the header's own entries, not against the peer that actually connected, so a client that writes
``X-Forwarded-For: <any>, <a trusted proxy>`` is believed.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
LOOPBACK = ("127.0.0.1", "::1")  # where the web process's nginx connects from


@lru_cache(maxsize=8)
def _networks(trusted: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in trusted)


def _trusted(address: str, networks: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def _walk(request: HttpRequest) -> tuple[str, bool]:
    """The nearest address that is not a trusted proxy, and whether a trusted proxy named it."""
    meta = getattr(request, "META", {})
    address = meta.get("REMOTE_ADDR", "") or ""
    if settings.WEB_LOCAL_PROXY and address in LOOPBACK:
        address = meta.get("HTTP_X_REAL_IP", "") or address
    networks = _networks(tuple(settings.TRUSTED_PROXIES))
    hops = [hop.strip() for hop in meta.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    named = False
    while hops and _trusted(address, networks):
        address, named = hops.pop(), True
    return address, named or not _trusted(address, networks)


def client_ip(request: HttpRequest) -> str:
    """The nearest address that is not a trusted proxy (``REMOTE_ADDR`` when no proxy is trusted):
    what the lockout records and logs show."""
    return _walk(request)[0]


def client_address(request: HttpRequest) -> str | None:
    """The client's own address, or None where it cannot be told from a proxy's.

    Without ``TRUSTED_PROXIES`` the connecting address may be an ingress that everyone shares, so
    it is nobody's in particular; with them, the walk's address is a client's unless it is a
    trusted proxy that named nobody (no ``X-Forwarded-For``). Counting per address uses only this
    (docs/identity.md, "Failed logins"): a shared address never counts for the people behind it.
    """
    if not settings.TRUSTED_PROXIES:
        return None
    address, clients = _walk(request)
    return address if clients and address else None
