"""The gateway's settings, read once per process (see config/settings/base.py, "Inference gateway")."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from inference_gateway.headers import ALWAYS_PASSED, passed_header_errors
from inference_gateway.memory import Budget


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
    upstream_idle_timeout: float
    max_body_bytes: int
    max_bytes_in_flight: int
    passed_headers: frozenset[str]

    def __post_init__(self) -> None:
        """A gateway that could never pass a request it accepts, or would pass a header no backend
        may set, does not start: the message names the setting, its value and the rule."""
        errors = passed_header_errors(self.passed_headers)
        largest = self.max_body_bytes + self.max_response_bytes
        usable = Budget(self.max_bytes_in_flight).large_limit
        if usable < largest:
            errors.append(
                f"GATEWAY_MAX_BYTES_IN_FLIGHT: {self.max_bytes_in_flight} leaves {usable} bytes for one request "
                f"(7/8 of it; the rest is kept for small requests), less than the largest request body and answer "
                f"together (GATEWAY_MAX_BODY_BYTES + GATEWAY_MAX_RESPONSE_BYTES = {largest})")
        if errors:
            raise ImproperlyConfigured("; ".join(errors))

    @classmethod
    def from_django(cls) -> GatewaySettings:
        total = settings.GATEWAY_UPSTREAM_TIMEOUT_SECONDS  # the idle limit: 0 (the default) or above it, the total
        return cls(
            wake_timeout=float(settings.GATEWAY_WAKE_TIMEOUT_SECONDS),
            retry_after=int(settings.GATEWAY_RETRY_AFTER_SECONDS),
            catalog_ttl=float(settings.GATEWAY_CATALOG_TTL_SECONDS),
            caller_ttl=float(settings.GATEWAY_CALLER_TTL_SECONDS),
            stamp_interval=float(settings.GATEWAY_LAST_REQUEST_INTERVAL_SECONDS),
            endpoints_ttl=float(settings.GATEWAY_ENDPOINTS_TTL_SECONDS),
            eject_seconds=float(settings.GATEWAY_EJECT_SECONDS),
            upstream_timeout=float(total),
            wake_poll=float(settings.GATEWAY_WAKE_POLL_SECONDS),
            max_response_bytes=int(settings.GATEWAY_MAX_RESPONSE_BYTES),
            connect_timeout=float(settings.GATEWAY_CONNECT_TIMEOUT_SECONDS),
            client_timeout=float(settings.GATEWAY_CLIENT_TIMEOUT_SECONDS),
            upstream_idle_timeout=float(min(settings.GATEWAY_UPSTREAM_IDLE_SECONDS or total, total)),
            max_body_bytes=int(settings.GATEWAY_MAX_BODY_BYTES),
            max_bytes_in_flight=int(settings.GATEWAY_MAX_BYTES_IN_FLIGHT),
            passed_headers=ALWAYS_PASSED | {name.lower() for name in settings.GATEWAY_PASSED_HEADERS},
        )
