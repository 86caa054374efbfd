"""The gateway's settings, read once per process (see config/settings/base.py, "Inference gateway")."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class GatewaySettings:
    wake_timeout: float
    retry_after: int
    catalog_ttl: float
    caller_ttl: float
    stamp_interval: float
    endpoints_ttl: float
    eject_seconds: float
    upstream_timeout: float
    wake_poll: float
    max_response_bytes: int
    connect_timeout: float
    client_timeout: float

    @classmethod
    def from_django(cls) -> GatewaySettings:
        return cls(
            wake_timeout=float(settings.GATEWAY_WAKE_TIMEOUT_SECONDS),
            retry_after=int(settings.GATEWAY_RETRY_AFTER_SECONDS),
            catalog_ttl=float(settings.GATEWAY_CATALOG_TTL_SECONDS),
            caller_ttl=float(settings.GATEWAY_CALLER_TTL_SECONDS),
            stamp_interval=float(settings.GATEWAY_LAST_REQUEST_INTERVAL_SECONDS),
            endpoints_ttl=float(settings.GATEWAY_ENDPOINTS_TTL_SECONDS),
            eject_seconds=float(settings.GATEWAY_EJECT_SECONDS),
            upstream_timeout=float(settings.GATEWAY_UPSTREAM_TIMEOUT_SECONDS),
            wake_poll=float(settings.GATEWAY_WAKE_POLL_SECONDS),
            max_response_bytes=int(settings.GATEWAY_MAX_RESPONSE_BYTES),
            connect_timeout=float(settings.GATEWAY_CONNECT_TIMEOUT_SECONDS),
            client_timeout=float(settings.GATEWAY_CLIENT_TIMEOUT_SECONDS),
        )
