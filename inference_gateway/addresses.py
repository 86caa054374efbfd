"""One reading of a backend's address, for every decision and every connection.

A rule that reads a URL one way while the HTTP client reads it another judges a host nobody
connects to: ``127.0.0.1`` written in full-width digits and dots is one label (a Service name) to
``urlsplit`` and ``127.0.0.1`` to yarl, which aiohttp connects with. So every reader of a
backend's address asks :func:`parse_backend_url` (or :func:`normalize_host` for a bare host),
which parses with yarl, the very parser the gateway's client connects with (Unicode NFKC folding
and IDNA included), and returns the one ASCII host the rules judge and the gateway connects to:

- an IP address in its canonical form, whatever the spelling (``127.1``, ``2130706433``,
  ``0x7f.0.0.1``, ``0177.0.0.1`` are 127.0.0.1 to the C resolver; IPv4-mapped ``::ffff:127.0.0.1``,
  IPv4-compatible ``::127.0.0.1`` and NAT64 ``64:ff9b::127.0.0.1`` are judged as the IPv4 address
  they carry), or
- a DNS name of letters, digits and hyphens in dot-separated labels, lower case, without a
  trailing dot (an IDN in its ``xn--`` form).

Anything else (percent-escapes, underscores, spaces, zone ids, characters IDNA refuses) is not a
backend address. :func:`address_refusal` says which addresses no backend may have; the gateway's
connector asks it again for the address of every socket it opens (``inference_gateway.resolver``).
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from yarl import URL

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
SCHEMES = ("http", "https")
# Instance metadata services: AWS/GCP/Azure/OpenStack (169.254.169.254, inside link-local anyway),
# AWS ECS task metadata, AWS over IPv6, Alibaba Cloud, Azure's wire server.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200", "168.63.129.16")
)
METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "metadata.azure.com"})
LOOPBACK_RULE = "is loopback, allowed only where GATEWAY_ALLOW_LOOPBACK=1 (development and tests)"
_NUMERIC_HOST = re.compile(r"[0-9a-fx.]+", re.IGNORECASE)
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DNS_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")  # Linux connects 0.0.0.0 to this host; the rest is no unicast


class NotAnAddress(ValueError):
    """A URL or host that is not a backend address; the message is the rule, to follow the value."""


@dataclass(frozen=True)
class BackendURL:
    """A backend URL as the gateway connects to it: ``host`` is the normalized host (see the
    module's docstring), ``ip`` its address when it is an IP literal."""

    scheme: str
    host: str
    port: int
    path: str
    ip: IPAddress | None


def ip_of(host: str) -> IPAddress | None:
    """The address a host literally is, in any form the C resolver reads as one, IPv4 addresses
    carried in IPv6 ones unwrapped; None for a name."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if not _NUMERIC_HOST.fullmatch(host):
            return None
        try:
            address = ipaddress.ip_address(socket.inet_aton(host))
        except OSError:
            return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped  # ::ffff:127.0.0.1 reaches 127.0.0.1
        if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)  # a translator would reach the IPv4 address
    return address


def normalize_host(written: str) -> tuple[str, IPAddress | None]:
    """The ASCII host yarl (and so aiohttp) reads ``written`` as, and its IP when it is one.
    Raises NotAnAddress when it is neither an IP nor a DNS name (see the module's docstring)."""
    if not written:
        raise NotAnAddress("has no host")
    bracketed = f"[{written}]" if ":" in written and not written.startswith("[") else written
    try:
        raw = URL.build(scheme="http", authority=bracketed).raw_host or ""
    except (ValueError, TypeError, UnicodeError) as error:
        raise NotAnAddress(f"names {written!r}, which is not a host name or IP address ({error})") from None
    host = raw.rstrip(".")  # judged and connected to without it: `svc.` would leave the cluster's search path
    if "%" in host and ":" in host:
        raise NotAnAddress(f"names {written!r} with a zone id (%), which no backend address carries")
    address = ip_of(host)
    if address is not None:
        return str(address), address
    if not _DNS_NAME.fullmatch(host) or len(host) > 253:
        raise NotAnAddress(f"names {written!r}, which is not a host name (letters, digits, hyphens and dots) "
                           "or an IP address")
    return host, None


def parse_backend_url(url: Any) -> BackendURL:
    """``url`` as the gateway will connect to it; NotAnAddress says why it cannot be a backend URL."""
    if not isinstance(url, str):
        raise NotAnAddress("must be an http(s) URL (a string)")
    try:
        parsed = URL(url)
        port = parsed.port
    except (ValueError, TypeError, UnicodeError) as error:
        raise NotAnAddress(f"is not a valid URL ({error})") from None
    if parsed.scheme.lower() not in SCHEMES:
        raise NotAnAddress(f"must use http or https, not {parsed.scheme or 'no scheme'!r}")
    if not parsed.raw_host:
        raise NotAnAddress("has no host")
    if parsed.user is not None or parsed.password is not None:
        raise NotAnAddress("must not carry user-info (user:password@)")
    host, address = normalize_host(parsed.raw_host)
    if not port:
        raise NotAnAddress("has port 0, which no backend listens on")
    return BackendURL(parsed.scheme.lower(), host, port, parsed.raw_path, address)


def written_port(url: Any) -> int | None:
    """The port ``url`` names, read as the gateway reads it (None when it names none: the scheme's
    default is then what the gateway connects to). Raises NotAnAddress as :func:`parse_backend_url`."""
    parse_backend_url(url)
    return URL(url).explicit_port


@functools.cache
def _this_hosts_addresses() -> frozenset[IPAddress]:
    """The addresses this host's name resolves to (a pod's IP); loopback is left to its own rule."""
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None)
    except OSError:
        return frozenset()
    found = (ip_of(str(info[4][0]).split("%")[0]) for info in infos)
    return frozenset(address for address in found if address is not None and not address.is_loopback)


def own_names() -> frozenset[str]:
    """The portal's and gateway's own host names and addresses, normalized: GATEWAY_OWN_HOSTS and
    the exact (not wildcard) ALLOWED_HOSTS, loopback names left to the loopback rule."""
    return _own_names(tuple(settings.GATEWAY_OWN_HOSTS), tuple(settings.ALLOWED_HOSTS))


@functools.lru_cache(maxsize=8)
def _own_names(own_hosts: tuple[str, ...], allowed_hosts: tuple[str, ...]) -> frozenset[str]:
    """Cached per settings (asked for every route and every socket; normalizing is 60 us a call)."""
    names = set()
    for name in {*own_hosts, *allowed_hosts}:
        if not name or name.startswith(".") or name == "*":
            continue
        try:
            host, _ = normalize_host(name.strip("[]"))
        except NotAnAddress:
            continue
        if not is_loopback_name(host):
            names.add(host)
    return frozenset(names)


def is_loopback_name(host: str) -> bool:
    """Loopback by what the (normalized) host says: a loopback IP, ``localhost`` or a name under it."""
    address = ip_of(host)
    if address is not None:
        return address.is_loopback
    return host == "localhost" or host.endswith(".localhost")


def address_refusal(address: IPAddress | str) -> str | None:
    """Why a backend may not be reached at ``address``; None when it may. Asked for IP literals in
    URLs, for replicas from EndpointSlices and for the address of every socket the gateway opens."""
    if isinstance(address, str):
        parsed = ip_of(address.split("%")[0])
        if parsed is None:
            return None
        address = parsed
    else:
        address = ip_of(str(address)) or address
    if address in METADATA_ADDRESSES:
        return "is a cloud metadata address"
    if address.is_link_local:
        return "is link-local (169.254.0.0/16, fe80::/10)"
    if (address.is_unspecified or address.is_multicast or address in _THIS_NETWORK
            or (address.is_reserved and address.version == 4)):
        return "is not a unicast address"
    if address.is_loopback:
        return None if settings.GATEWAY_ALLOW_LOOPBACK else LOOPBACK_RULE
    if str(address) in own_names() or (address in _this_hosts_addresses() and not settings.GATEWAY_ALLOW_LOOPBACK):
        return "is the portal's own address"  # in development every process shares this host's addresses
    return None


def host_refusal(host: str, address: IPAddress | None) -> str | None:
    """The never-allowed classes for a normalized host, whatever staff listed: refused addresses,
    loopback names, metadata names, the portal's own names. None: the placement rules decide."""
    if address is not None:
        return address_refusal(address)
    if is_loopback_name(host):
        return None if settings.GATEWAY_ALLOW_LOOPBACK else LOOPBACK_RULE
    if host in METADATA_NAMES or any(host.endswith(f".{name}") for name in METADATA_NAMES):
        return "is a cloud metadata address"
    if host in own_names():
        return "is the portal's own address"
    return None
