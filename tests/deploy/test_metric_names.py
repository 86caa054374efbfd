"""Every metric of the portal (its pages, the sync, the controllers, django-prometheus) and of the
gateway follows Prometheus' naming conventions under one prefix: ``inference_portal_``, a unit on
histograms and summaries (django-prometheus puts it mid-name: ``..._latency_seconds_by_view_method``),
``_total`` on counters. Only prometheus_client's standard process and
runtime collectors (``process_*``, ``python_*``) keep their well-known names."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Summary

from inference_gateway import metrics as gateway_metrics

PREFIX = "inference_portal_"
STANDARD = ("process_", "python_")
UNITS = ("_seconds", "_bytes")


def convention_breaches(registry: CollectorRegistry) -> list[str]:
    breaches = []
    for family in registry.collect():
        if family.name.startswith(STANDARD):
            continue
        if not family.name.startswith(PREFIX):
            breaches.append(f"{family.name}: not under {PREFIX}")
        if family.type in ("histogram", "summary") and not any(f"{unit}_" in f"{family.name}_" for unit in UNITS):
            breaches.append(f"{family.name}: a {family.type} without a unit")
        if family.type == "counter":
            breaches += [f"{s.name}: a counter sample without _total" for s in family.samples
                         if not s.name.endswith(("_total", "_created"))]  # fmt: skip
    return breaches


@pytest.mark.django_db
def test_every_portal_metric_is_named_by_convention(metrics_client) -> None:
    call_command("load_demo", stdout=io.StringIO())
    metrics_client.get("/healthz")  # a request, so the HTTP series exist
    body = metrics_client.get("/metrics").content.decode()  # what /metrics serves: the default registry
    assert f"{PREFIX}django_http_requests_total_by_method_total" in body and f"{PREFIX}mirrored_objects" in body
    assert convention_breaches(REGISTRY) == []


def test_every_gateway_metric_is_named_by_convention() -> None:
    gateway_metrics.observe("convention-check", 200, 0.5, 0.1)
    gateway_metrics.count_usage("convention-check", {"prompt_tokens": 1, "completion_tokens": 1})
    body = gateway_metrics.exposition().decode()
    assert f'{PREFIX}gateway_requests_total{{model="convention-check",status="200"}}' in body
    assert convention_breaches(gateway_metrics.REGISTRY) == []


def test_a_name_off_the_convention_is_found() -> None:
    registry = CollectorRegistry()
    Counter("gateway_requests", "off the prefix", registry=registry).inc()
    Summary("inference_portal_wait", "no unit", registry=registry).observe(1)
    assert convention_breaches(registry) == ["gateway_requests: not under inference_portal_",
                                         "inference_portal_wait: a summary without a unit"]  # fmt: skip
