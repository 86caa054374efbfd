"""What a client's ``model`` resolves to (one object or a clear error), routes fresh for the next
request after a change (PostgreSQL notices, no TTL), failures that are not the client's are 5xx with
the reason and never 500, and random requests never get a 5xx the backend did not send."""

from __future__ import annotations

import json

import pytest
import requests
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts.models import NamespaceGrant, Team
from accounts.tokens import issue_token
from clusters.models import Cluster
from inference_gateway.models import SharedGatewayId
from models_app.models import InferenceModel
from tests.clusters.conftest import wait_for
from tests.gateway.conftest import serve_model

pytestmark = pytest.mark.django_db(transaction=True)


def chat(gateway, key: str, model: str) -> requests.Response:
    return requests.post(f"{gateway.url}/v1/chat/completions", headers={"Authorization": f"Bearer {key}"},
                         json={"model": model, "messages": [{"role": "user", "content": "hi"}]}, timeout=30)


@pytest.fixture
def no_ttl(gateway_settings):
    """Only notices refresh the catalog: the periodic reload is an hour away."""
    gateway_settings.GATEWAY_CATALOG_TTL_SECONDS = 3600
    return gateway_settings


def listening(gateway) -> bool:
    return requests.get(f"{gateway.url}/healthz", timeout=5).headers["X-Catalog-Notices"] == "listening"


def test_a_name_two_namespaces_serve_resolves_by_id_never_by_sort_order(
        cluster, gateway, api_key, make_user, start_backend) -> None:
    a, b = start_backend("a"), start_backend("b")
    serve_model(cluster, "llama", a.url, namespace="team-a")
    serve_model(cluster, "llama", b.url, namespace="team-b")
    both = Team.objects.create(name="both")
    for namespace in ("team-a", "team-b"):
        NamespaceGrant.objects.create(team=both, cluster=None, namespace=namespace)
    _, both_key = issue_token(make_user("bob", teams=[both]), "tests")

    assert chat(gateway, api_key, "llama").headers["X-Backend"] == "a"  # team-a sees one: unambiguous
    ambiguous = chat(gateway, both_key, "llama")
    assert (ambiguous.status_code, ambiguous.json()["error"]["code"]) == (400, "model_ambiguous")
    assert "team-a/llama, team-b/llama" in ambiguous.json()["error"]["message"]
    assert chat(gateway, both_key, "team-b/llama").headers["X-Backend"] == "b"
    assert chat(gateway, api_key, "team-b/llama").status_code == 404  # team-a may not see team-b's
    listed = requests.get(f"{gateway.url}/v1/models", headers={"Authorization": f"Bearer {both_key}"}, timeout=5)
    assert [entry["id"] for entry in listed.json()["data"]] == ["team-a/llama", "team-b/llama"]


def test_an_id_two_clusters_serve_is_refused_until_staff_share_it(cluster, gateway, api_key, start_backend) -> None:
    a, b = start_backend("a"), start_backend("b")
    other = Cluster.objects.create(name="other", auth_method=Cluster.AuthMethod.SNAPSHOT)
    serve_model(cluster, "llama", a.url)
    serve_model(other, "llama", b.url)  # mirrored from a cluster as it is: never validated
    conflict = chat(gateway, api_key, "team-a/llama")
    assert (conflict.status_code, conflict.json()["error"]["code"]) == (409, "model_id_conflict")
    SharedGatewayId.objects.create(cluster=other, gateway_id="team-a/llama")
    assert chat(gateway, api_key, "team-a/llama").status_code == 200


def test_created_renamed_moved_and_deleted_models_route_at_once(no_ttl, cluster, gateway, api_key,
                                                                 start_backend) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("catalog notices are PostgreSQL's LISTEN/NOTIFY; SQLite has the periodic reload only")
    backend = start_backend()
    wait_for(lambda: listening(gateway), timeout=30, message="the gateway to listen for catalog notices")
    assert chat(gateway, api_key, "team-a/fresh").status_code == 404  # the table is loaded before the model exists

    def routes(model: str, status: int) -> None:
        """The notice reaches the gateway within milliseconds of the commit, not before the commit
        returns: a request sent at that moment may still see the table as it was."""
        wait_for(lambda: chat(gateway, api_key, model).status_code == status, timeout=30,
                 message=f"{model} to answer {status} once the change's notice is in")

    row = serve_model(cluster, "fresh", backend.url)
    routes("team-a/fresh", 200)
    row.spec = {**row.spec, "modelName": "renamed"}
    row.save()
    routes("team-a/fresh", 404)
    routes("team-a/renamed", 200)
    InferenceModel.objects.filter(pk=row.pk).update(namespace="team-b")  # a bulk write, as the sync does
    routes("team-a/renamed", 404)
    InferenceModel.objects.filter(pk=row.pk).update(namespace="team-a")
    routes("team-a/renamed", 200)
    row.delete()
    routes("team-a/renamed", 404)
    # without the notices only the periodic reload would bring these, an hour away here (no_ttl)


def test_a_wake_on_a_cluster_whose_client_fails_is_a_503(gateway, api_key, transactional_db) -> None:
    broken = Cluster.objects.create(name="broken", auth_method=Cluster.AuthMethod.TOKEN, bearer_token="t",
                                    server_url="https://127.0.0.1:9", managed_kinds=["InferenceModel"])
    row = serve_model(broken, "sleepy", "http://sleepy:8000")
    InferenceModel.objects.filter(pk=row.pk).update(ready=False, status={})
    answer = chat(gateway, api_key, "team-a/sleepy")
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] in ("wake_failed", "model_not_ready")
    assert answer.headers["Retry-After"]


HEADER_TEXT = st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=40)
JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


@st.composite
def requests_strategy(draw) -> tuple[str, bytes, dict[str, str]]:
    path = draw(st.sampled_from(["/v1/chat/completions", "/v1/completions", "/v1/embeddings"]))
    kind = draw(st.sampled_from(["bytes", "json", "request"]))
    if kind == "bytes":
        body = draw(st.binary(max_size=200))
    elif kind == "json":
        body = json.dumps(draw(JSON_VALUES)).encode()
    else:
        fields = draw(st.dictionaries(st.sampled_from(["messages", "prompt", "input", "stream", "max_tokens",
                                                       "temperature", "stream_options"]), JSON_VALUES, max_size=5))
        fields["model"] = draw(st.sampled_from(["team-a/fuzz", "fuzz", "team-b/fuzz", "nope"]) | st.text(max_size=10))
        body = json.dumps(fields).encode()
    headers = draw(st.dictionaries(
        st.sampled_from(["Content-Type", "Content-Encoding", "Accept", "Accept-Encoding", "X-Anything", "Cookie",
                         "Transfer-Encoding", "Expect", "Connection"]),
        HEADER_TEXT | st.sampled_from(["gzip", "deflate", "br", "identity", "chunked", "application/json",
                                       "text/event-stream", "100-continue", "close"]), max_size=4))
    return path, body, headers


def test_random_requests_get_no_5xx_the_backend_did_not_send(cluster, gateway, api_key, start_backend) -> None:
    backend = start_backend("fuzz")
    serve_model(cluster, "fuzz", backend.url)
    session = requests.Session()

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(requests_strategy())
    def check(request: tuple[str, bytes, dict[str, str]]) -> None:
        path, body, headers = request
        try:
            answer = session.post(f"{gateway.url}{path}", data=body, timeout=30,
                                  headers={**headers, "Authorization": f"Bearer {api_key}"})
        except requests.ConnectionError:
            return  # the gateway (aiohttp's parser) refused a malformed request by closing: no answer, no 5xx
        assert answer.status_code < 500, (answer.status_code, answer.text[:300], request)

    check()


def test_a_name_spelled_as_another_namespaces_id_never_catches_its_requests(
        cluster, gateway, make_user, start_backend) -> None:
    """team-b's model named ``team-a/idx`` (mirrored as it is) is not where team-b's requests for
    team-a's ``idx`` go: an id is only ever that id, even for a caller who may not see it."""
    a, b = start_backend("a"), start_backend("b")
    serve_model(cluster, "idx", a.url, namespace="team-a")
    serve_model(cluster, "team-a/idx", b.url, namespace="team-b")
    team_b = Team.objects.create(name="team-b")
    NamespaceGrant.objects.create(team=team_b, cluster=None, namespace="team-b")
    _, key = issue_token(make_user("bea", teams=[team_b]), "tests")
    answer = chat(gateway, key, "team-a/idx")
    assert (answer.status_code, answer.json()["error"]["code"]) == (404, "model_not_found")
    assert chat(gateway, key, "team-b/team-a/idx").headers["X-Backend"] == "b"  # its own id still routes
    assert "/v1/chat/completions" not in a.stats()


@pytest.mark.parametrize("model_name", ["my model", "llama\u200b", "ll\u0430ma", "../../etc", "x" * 200,
                                        "org/sub/name", "-lead", "a..b", "team\uff0fidx"])
def test_mirrored_models_with_names_no_client_should_send_are_not_routed(
        cluster, gateway, api_key, start_backend, model_name: str) -> None:
    backend = start_backend()
    row = serve_model(cluster, model_name, backend.url)
    answer = chat(gateway, api_key, row.gateway_id)
    assert (answer.status_code, answer.json()["error"]["code"]) == (502, "backend_refused"), answer.text
    assert "spec.modelName must be a model name of ASCII letters" in answer.json()["error"]["message"]
    assert chat(gateway, api_key, model_name).status_code == 404  # never reached by its bare name
    assert "/v1/chat/completions" not in backend.stats()
