"""The gateway's only way out: every upstream socket's address is checked before it connects.

Validation refuses a ``backendUrl`` by what it says; a name can still resolve, now or later, to an
address no backend may have (loopback outside development, link-local, metadata, the portal's
own: ``inference_gateway.addresses.address_refusal``), by misconfiguration or DNS rebinding, and
aiohttp does not ask the resolver at all for an IP literal. So the check runs twice, on the very
addresses aiohttp connects to:

- :class:`GuardedResolver` on every address a name resolves to (the message names the name), and
- :func:`guarded_socket`, the connector's socket factory, on the address of every socket it opens,
  IP literals and resolved names alike: nothing connects without passing it.

A refused address fails like an unreachable one, with the reason.

Names under ``localhost`` (``engine-0.localhost``) are loopback by RFC 6761 (section 6.3), whatever
the host's resolver says (glibc without systemd-resolved finds none): they resolve to 127.0.0.1
here, and are then refused like any loopback address outside development. The live demo's
EndpointSlices name its engines so (kube-apiserver takes no loopback IP, and no single-label name).
"""

from __future__ import annotations

import errno
import socket
from typing import Any

import aiohttp
from aiohappyeyeballs import AddrInfoType
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from inference_gateway.addresses import address_refusal, ip_of, is_loopback_name


class RefusedAddress(OSError):
    """A backend name resolved to, or a connection was about to open to, an address no backend may have."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EPERM, message)  # strerror: what aiohttp's connection error shows


class GuardedResolver(AbstractResolver):
    """aiohttp's default (threaded, getaddrinfo) resolver, then :func:`address_refusal` on every address."""

    def __init__(self) -> None:
        self._resolver = ThreadedResolver()

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
                      ) -> list[ResolveResult]:
        if is_loopback_name(host) and ip_of(host) is None and host != "localhost":  # RFC 6761: *.localhost
            results: list[ResolveResult] = [{"hostname": host, "host": "127.0.0.1", "port": port,
                                             "family": socket.AF_INET, "proto": 0, "flags": socket.AI_NUMERICHOST}]
        else:
            results = await self._resolver.resolve(host, port, family)
        for result in results:
            refused = address_refusal(result["host"])
            if refused:
                raise RefusedAddress(f"{host} resolves to {result['host']}, which {refused}")
        return results

    async def close(self) -> None:
        await self._resolver.close()


def guarded_socket(addr_info: AddrInfoType) -> socket.socket:
    """The connector's socket factory: a socket for ``addr_info`` unless its address is refused."""
    family, kind, proto, _, address = addr_info
    refused = address_refusal(str(address[0]))
    if refused:
        raise RefusedAddress(f"{address[0]} {refused}")
    return socket.socket(family=family, type=kind, proto=proto)


def guarded_connector(**options: Any) -> aiohttp.TCPConnector:
    """A TCPConnector whose every connection passes :class:`GuardedResolver` and :func:`guarded_socket`."""
    return aiohttp.TCPConnector(resolver=GuardedResolver(), socket_factory=guarded_socket, **options)
