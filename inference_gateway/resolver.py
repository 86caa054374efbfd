"""Name resolution for the gateway's upstream connections, refusing what a backend may never be.

Validation refuses a ``backendUrl`` by what it says; a name can still resolve, now or later, to an
address no backend may have (loopback outside development, link-local, metadata, the portal's
own: ``inference_gateway.placement.address_refusal``), by misconfiguration or DNS rebinding. The
check runs here, on the very addresses aiohttp then connects to, so no second lookup can differ
from the checked one; a refused name fails like an unresolvable one, with the reason.
"""

from __future__ import annotations

import errno
import socket

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from inference_gateway.placement import address_refusal


class RefusedAddress(OSError):
    """A backend name resolved to an address no backend may have."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EPERM, message)  # strerror: what aiohttp's connection error shows


class GuardedResolver(AbstractResolver):
    """aiohttp's default (threaded, getaddrinfo) resolver, then :func:`address_refusal` on every address."""

    def __init__(self) -> None:
        self._resolver = ThreadedResolver()

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
                      ) -> list[ResolveResult]:
        results = await self._resolver.resolve(host, port, family)
        for result in results:
            refused = address_refusal(result["host"])
            if refused:
                raise RefusedAddress(f"{host} resolves to {result['host']}, which {refused}")
        return results

    async def close(self) -> None:
        await self._resolver.close()
