"""Fuzz every operation of the OpenAPI schema (schemathesis, in-process WSGI): no request gets a 5xx,
and every answer is one the schema documents: its status code, its content type and its body's
schema (schemathesis' response checks), errors included (``clusters.web.api.schema``).

Bounded on purpose (a few examples per operation, a few hundred requests in all) so the suite stays
fast; the cluster is a snapshot one, so writes never try to reach an API server.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from accounts.tokens import issue_token
from clusters.models import Cluster
from config.wsgi import application
from tests.accounts.conftest import sample_in, store
from tests.conftest import ALL_KIND_PERMS

EXAMPLES_PER_OPERATION = 6
# the answer matches what the schema says of it: a client generated from the schema can read it
RESPONSE_CHECKS = [status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture
def in_process_wsgi():
    """Keep the test's database connection open across WSGI requests, as Django's test Client does."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture(params=["superuser", "member"])
def fuzz_target(request, make_user, in_process_wsgi):
    """The schema, called as a superuser (every operation gets past its permission check) or as a
    team member allowed to edit the mirrored kinds (staff actions answer 403, which is documented too)."""
    cluster = Cluster.objects.create(name="fuzz", auth_method=Cluster.AuthMethod.SNAPSHOT)
    for kind in ("InferenceModel", "Model", "ModelService", "InferenceConfig", "InferenceRun"):
        store(cluster, sample_in(kind, "default"))
    if request.param == "member":
        user = make_user("fuzzer", perms=ALL_KIND_PERMS)
    else:
        user = make_user("fuzzer", staff=True)
        user.is_superuser = True
        user.save()
    headers = {"Authorization": f"Token {issue_token(user, 'fuzz')[1]}"}
    return schemathesis.openapi.from_wsgi("/api/schema/?format=json", application, headers=headers), headers


@pytest.mark.django_db
def test_every_generated_request_gets_a_documented_answer_never_a_server_error(fuzz_target):
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
                return
            try:
                case.validate_response(response, checks=RESPONSE_CHECKS, headers=headers)
            except (Failure, FailureGroup) as error:
                found = error.exceptions if isinstance(error, FailureGroup) else [error]
                failures.extend(f"{case.method} {case.operation.path} -> {response.status_code}: {failure.title}: "
                                f"{failure.message[:300]}" for failure in found)

        check()
    assert calls >= 150, calls  # the schema really was exercised
    assert not failures, "\n".join(sorted(set(failures)))
