"""Fuzz every operation of the OpenAPI schema (schemathesis, in-process WSGI): no request gets a 5xx.

Bounded on purpose (a few examples per operation, a few hundred requests in all) so the suite stays
fast; the cluster is a snapshot one, so writes never try to reach an API server.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given, settings

from accounts.tokens import issue_token
from clusters.models import Cluster
from config.wsgi import application
from tests.accounts.conftest import sample_in, store

EXAMPLES_PER_OPERATION = 6


@pytest.fixture
def in_process_wsgi():
    """Keep the test's database connection open across WSGI requests, as Django's test Client does."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def fuzz_target(make_user, in_process_wsgi):
    cluster = Cluster.objects.create(name="fuzz", auth_method=Cluster.AuthMethod.SNAPSHOT)
    for kind in ("InferenceModel", "Model", "ModelService", "InferenceConfig", "InferenceRun"):
        store(cluster, sample_in(kind, "default"))
    user = make_user("fuzzer", staff=True)
    user.is_superuser = True
    user.save()
    headers = {"Authorization": f"Token {issue_token(user, 'fuzz')[1]}"}
    return schemathesis.openapi.from_wsgi("/api/schema/?format=json", application, headers=headers), headers


@pytest.mark.django_db
def test_no_generated_request_gets_a_server_error(fuzz_target):
    schema, headers = fuzz_target
    failures: list[str] = []
    calls = 0
    for result in schema.get_all_operations():
        operation = result.ok()

        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None, derandomize=True,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(case=operation.as_strategy())
        def check(case) -> None:
            nonlocal calls
            calls += 1
            response = case.call(headers=headers)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path} {case.query} -> {response.status_code}")

        check()
    assert calls >= 150, calls  # the schema really was exercised
    assert not failures, "\n".join(failures[:20])
