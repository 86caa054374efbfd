"""Traces by convention (common/tracing.py): with ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, the real
processes export their spans by OTLP/HTTP to a collector (here the stand-in of
tests/support/otlp_collector.py, decoding the protobuf a real exporter posts). A request through
``manage.py gateway`` is one trace from the caller's ``traceparent`` through the gateway's server
span to its client span, whose context the backend receives as ``traceparent``; the web process
(``python -m config.web_server``, as deployed) traces its requests the same way, and a Celery worker its tasks, within
the trace the publisher put in the message. Without an endpoint nothing is installed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import aiohttp.web
import pytest
import requests
from celery import Celery
from django.conf import settings
from opentelemetry import trace

from common.tracing import configure_tracing, tracing_enabled
from config.web_server import WORKER_KILL_TIMEOUT_S
from devstack.ports import free_port
from tests.clusters.conftest import wait_for
from tests.gateway.conftest import api_key, cluster, serve_model, start_backend  # noqa: F401
from tests.support.otlp_collector import OtlpCollector, ReceivedSpan
from tests.support.services import CeleryWorker, require_redis, session_database_url

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


@pytest.fixture
def collector():
    running = OtlpCollector().start()
    yield running
    running.stop()


def traced_process(command: list[str], collector: OtlpCollector) -> subprocess.Popen:
    """``command`` on the test database, exporting its spans to ``collector`` within 0.1 s."""
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_BSP_SCHEDULE_DELAY": "100",
           "DATABASE_URL": session_database_url(), "DJANGO_SETTINGS_MODULE": "config.settings.local",
           "DEBUG": "false", "WEB_CONCURRENCY": "1",  # one web worker: serving, it has started
           "GATEWAY_PASSED_HEADERS": "X-Received-Traceparent"}  # fmt: skip  # the backend's echo, to the test
    return subprocess.Popen(command, cwd=settings.BASE_DIR, env=env)


def stop(process: subprocess.Popen) -> None:
    """SIGTERM, then the wait the server allows a worker still starting (it is killed after that)."""
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=WORKER_KILL_TIMEOUT_S + 30)


def serving(url: str, probe: str = "/healthz") -> bool:
    try:
        return requests.get(f"{url}{probe}", timeout=5).ok
    except requests.RequestException:  # not listening yet, or its workers still starting
        return False


def spans_of(collector: OtlpCollector, service: str, kind: str) -> list[ReceivedSpan]:
    return [s for s in collector.received() if s.service == service and s.kind == kind and s.trace_id == CALLER_TRACE]


def test_a_request_is_one_trace_from_the_caller_through_the_gateway_to_the_backend(
    collector,
    cluster,  # noqa: F811 (the gateway tests' fixtures, imported)
    api_key,  # noqa: F811
    start_backend,  # noqa: F811
) -> None:
    backend = start_backend("traced")
    serve_model(cluster, "traced-model", backend.url)
    port = free_port()
    gateway = traced_process([sys.executable, "manage.py", "gateway", "--host", "127.0.0.1", "--port", str(port)],
                             collector)  # fmt: skip
    try:
        wait_for(lambda: serving(f"http://127.0.0.1:{port}"), timeout=120, message="manage.py gateway to serve")
        response = requests.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "traced-model", "messages": [{"role": "user", "content": "hello"}]},
            headers={"Authorization": f"Bearer {api_key}", "traceparent": TRACEPARENT}, timeout=30,
        )  # fmt: skip
        assert response.status_code == 200, response.text
        version, trace_id, backend_parent, flags = response.headers["X-Received-Traceparent"].split("-")
        assert (version, trace_id, flags) == ("00", CALLER_TRACE, "01")  # the caller's trace, passed on
        wait_for(lambda: spans_of(collector, "inference-portal-gateway", "SPAN_KIND_CLIENT"),
                 timeout=30, message="the gateway's spans at the collector")  # fmt: skip
    finally:
        stop(gateway)
    [server] = spans_of(collector, "inference-portal-gateway", "SPAN_KIND_SERVER")
    [client] = spans_of(collector, "inference-portal-gateway", "SPAN_KIND_CLIENT")
    assert server.parent_span_id == CALLER_SPAN  # the caller's span continued
    assert client.parent_span_id == server.span_id  # the upstream call, inside the request's span
    assert client.span_id == backend_parent  # the backend was called in the client span's context
    assert str(backend.port) in str(client.attributes.get("url.full") or client.attributes.get("http.url"))


def test_the_web_process_traces_its_requests(collector, transactional_db) -> None:
    port = free_port()
    web = traced_process([sys.executable, "-m", "config.web_server", "--bind", f"127.0.0.1:{port}"], collector)
    try:
        # /readyz: Django's answer (nginx answers /healthz itself, untraced); then a page, traced
        wait_for(lambda: serving(f"http://127.0.0.1:{port}", "/readyz"), timeout=120,
                 message="the web server to serve")
        assert requests.get(f"http://127.0.0.1:{port}/login/", headers={"traceparent": TRACEPARENT}, timeout=10).ok
        wait_for(lambda: spans_of(collector, "inference-portal-web", "SPAN_KIND_SERVER"),
                 timeout=30, message="the web request's span at the collector")  # fmt: skip
    finally:
        stop(web)
    [span] = spans_of(collector, "inference-portal-web", "SPAN_KIND_SERVER")
    assert span.parent_span_id == CALLER_SPAN and span.name.startswith("GET")


def test_a_task_is_traced_in_the_worker_within_the_publishers_trace(collector, transactional_db, monkeypatch) -> None:
    broker = require_redis()
    for name, value in {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}.items():
        monkeypatch.setenv(name, value)  # the worker's environment (CeleryWorker starts from os.environ)
    worker = CeleryWorker(broker)
    try:
        # The context a traced publisher puts in the message. Not the current app: shared tasks
        # resolve through it, and later tests' tasks would go to this broker instead of running eagerly.
        with Celery(broker=broker, set_as_current=False) as publisher:
            publisher.send_task(
                "clusters.sync.tasks.reconcile_managed_clusters", queue="default", headers={"traceparent": TRACEPARENT}
            )
        wait_for(lambda: spans_of(collector, "inference-portal-worker", "SPAN_KIND_CONSUMER"), timeout=60,
                 message="the task's span at the collector")  # fmt: skip
    finally:
        worker.stop()
    [span] = spans_of(collector, "inference-portal-worker", "SPAN_KIND_CONSUMER")
    assert span.parent_span_id == CALLER_SPAN and "reconcile_managed_clusters" in span.name


def test_without_an_endpoint_nothing_is_installed(monkeypatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    application_class = aiohttp.web.Application
    assert not tracing_enabled() and configure_tracing("inference-portal-test") is False
    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"  # the API's no-op default
    assert aiohttp.web.Application is application_class  # the aiohttp server class is not patched
    assert not any("opentelemetry" in middleware for middleware in settings.MIDDLEWARE)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not tracing_enabled()
