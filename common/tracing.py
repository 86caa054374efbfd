"""Traces by OpenTelemetry, on only when an OTLP endpoint is configured.

``configure_tracing(service)`` is the one setup, called by each entry point (the WSGI application,
the Celery worker, ``manage.py gateway``). With ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set, it installs a tracer provider exporting by OTLP/HTTP
in batches, and the kept instrumentations: Django (a span per request), Celery (a span per task
published and run, the context carried in the message), the gateway's aiohttp server (a span per
request) and client (a span per upstream call, with the W3C ``traceparent`` header passed on to
the backend). The standard ``OTEL_*`` variables apply (``OTEL_SERVICE_NAME``, ``OTEL_TRACES_SAMPLER``,
``OTEL_BSP_*``, ``OTEL_EXPORTER_OTLP_HEADERS``...). Without an endpoint, or with
``OTEL_SDK_DISABLED=true``, nothing is installed: no provider, no middleware, no patched class,
so the request paths run exactly as without OpenTelemetry.
"""

from __future__ import annotations

import os
from typing import Any

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def tracing_enabled() -> bool:
    """An OTLP endpoint is configured and the SDK is not disabled."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(os.environ.get(name) for name in ENDPOINT_VARIABLES)


def configure_tracing(service: str) -> bool:
    """Install tracing for this process as ``service`` (unless ``OTEL_SERVICE_NAME`` names it);
    True when traces are exported. Idempotent: a second call (a forked child) keeps the first setup."""
    if not tracing_enabled():
        return False
    # Imported here: the processes without an endpoint never load the SDK.
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
    from opentelemetry.instrumentation.aiohttp_server import AioHttpServerInstrumentor
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return True
    # Resource.create adds OTEL_RESOURCE_ATTRIBUTES; the service name given here would win over
    # OTEL_SERVICE_NAME, hence the explicit lookup.
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # the endpoint from the environment
    trace.set_tracer_provider(provider)
    for instrumentor in (DjangoInstrumentor(), CeleryInstrumentor(), AioHttpServerInstrumentor(),
                         AioHttpClientInstrumentor()):  # fmt: skip
        instrumentor.instrument(tracer_provider=provider)
    return True


def untraced(session: Any) -> Any:
    """``session`` (an ``aiohttp.ClientSession``) without client spans: background polls (the
    gateway's engine-metrics reads, every 50 ms per replica) would otherwise export a span each and
    bury the requests' traces. A no-op when tracing is off (nothing was instrumented)."""
    if tracing_enabled():
        from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor

        AioHttpClientInstrumentor.uninstrument_session(session)
    return session
