"""The gateway speaks OpenAI's conventions everywhere, checked with the official client against a
gateway serving on its own event loop: ``/v1/models/{id}``, real ``created`` times, and OpenAI's
error shape for every answer the gateway writes itself (aiohttp's 404 and 405 included)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime

import openai
import pytest
import requests
from django.conf import settings

from devstack.ports import free_port, wait_serving
from models_app.models import KubeAIModel
from tests.gateway.conftest import serve_model

pytestmark = pytest.mark.django_db(transaction=True)

OPENAI_ERROR_KEYS = {"message", "type", "param", "code"}


def openai_error(answer: requests.Response) -> dict:
    """The ``error`` object of an answer, after checking it is OpenAI's JSON error shape."""
    assert answer.headers["Content-Type"].startswith("application/json"), answer.text
    error = answer.json()["error"]
    assert set(error) == OPENAI_ERROR_KEYS
    return error


def test_models_retrieve_answers_the_listed_entry_with_its_creation_time(cluster, gateway, api_key) -> None:
    in_cluster = datetime(2024, 3, 1, 12, 30, 5, tzinfo=UTC)
    mirrored = serve_model(cluster, "llama", "http://llama.team-a.svc:8000")
    mirrored.cluster_created_at = in_cluster
    mirrored.save(update_fields=["cluster_created_at"])
    portal_made = KubeAIModel.objects.create(cluster=cluster, namespace="team-a", name="nomic", sync_state="Synced",
                                             spec={"url": "ollama://nomic-embed-text", "engine": "OLlama",
                                                   "features": ["TextEmbedding"]})
    client = gateway.client(api_key)

    listed = {model.id: model for model in client.models.list()}
    assert listed["team-a/llama"].created == int(in_cluster.timestamp())  # the object's creationTimestamp
    assert portal_made.cluster_created_at is None
    assert listed["team-a/nomic"].created == int(portal_made.created_at.timestamp())  # not yet seen in the cluster
    for model_id in ("team-a/llama", "team-a/nomic"):
        retrieved = client.models.retrieve(model_id)  # the client percent-encodes the id's slash
        assert retrieved.model_dump() == listed[model_id].model_dump()
    by_path = requests.get(f"{gateway.url}/v1/models/team-a/llama", headers={"Authorization": f"Bearer {api_key}"},
                           timeout=5)
    assert by_path.json() == listed["team-a/llama"].model_dump(exclude_unset=True)
    assert client.models.retrieve("llama").id == "team-a/llama"  # a bare name, as a request's `model` resolves


def test_models_retrieve_refuses_alike_what_is_missing_or_anothers(cluster, gateway, api_key) -> None:
    serve_model(cluster, "theirs", "http://127.0.0.1:9", namespace="team-b")
    client = gateway.client(api_key)
    errors = {}
    for model_id in ("team-b/theirs", "team-a/nobody-has-this"):
        with pytest.raises(openai.NotFoundError) as caught:
            client.models.retrieve(model_id)
        errors[model_id] = caught.value
        assert (caught.value.code, caught.value.param) == ("model_not_found", "model")
    assert errors["team-b/theirs"].message.replace("team-b/theirs", "X") == \
        errors["team-a/nobody-has-this"].message.replace("team-a/nobody-has-this", "X")
    with pytest.raises(openai.AuthenticationError) as caught:
        gateway.client("not-a-portal-token").models.retrieve("team-b/theirs")
    assert caught.value.code == "invalid_api_key"


def test_unknown_paths_and_wrong_methods_answer_openai_errors(gateway, api_key) -> None:
    headers = {"Authorization": f"Bearer {api_key}"}
    unknown = requests.post(f"{gateway.url}/v1/nothing-here", json={}, headers=headers, timeout=5)
    assert unknown.status_code == 404
    assert openai_error(unknown) == {"message": "Invalid URL (POST /v1/nothing-here)", "type": "invalid_request_error",
                                     "param": None, "code": "unknown_url"}
    with pytest.raises(openai.NotFoundError) as caught:
        gateway.client(api_key).get("/assistants-are-not-served", cast_to=object)
    assert caught.value.code == "unknown_url"

    get_chat = requests.get(f"{gateway.url}/v1/chat/completions", headers=headers, timeout=5)
    assert get_chat.status_code == 405
    assert get_chat.headers["Allow"] == "POST"
    assert openai_error(get_chat)["code"] == "method_not_allowed"
    post_models = requests.post(f"{gateway.url}/v1/models", json={}, headers=headers, timeout=5)
    assert post_models.status_code == 405
    assert set(post_models.headers["Allow"].split(",")) == {"GET", "HEAD"}
    assert "takes GET, HEAD" in openai_error(post_models)["message"]


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-portal-token", "Basic YWxpY2U6cHc="])
def test_every_path_challenges_a_caller_without_a_valid_key(gateway, authorization: str | None) -> None:
    """A missing, unknown or foreign-scheme key is OpenAI's 401 with RFC 6750's challenge, on every
    path that takes a key (clients and proxies read the challenge, not the body)."""
    headers = {"Authorization": authorization} if authorization else {}
    calls = [("GET", "/v1/models"), ("GET", "/v1/models/team-a/any"), ("POST", "/v1/chat/completions"),
             ("POST", "/v1/completions"), ("POST", "/v1/embeddings")]
    for method, path in calls:
        refused = requests.request(method, f"{gateway.url}{path}", headers=headers, timeout=10,
                                   json={"model": "any", "messages": []} if method == "POST" else None)
        assert (refused.status_code, openai_error(refused)["code"]) == (401, "invalid_api_key"), path
        assert refused.headers["WWW-Authenticate"] == 'Bearer realm="inference-gateway"', path


def test_metrics_without_its_token_is_a_challenged_openai_error(gateway) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        refused = requests.get(f"{gateway.url}/metrics", headers=headers, timeout=5)
        assert (refused.status_code, refused.headers["WWW-Authenticate"]) == (401, 'Bearer realm="metrics"')
        assert openai_error(refused)["code"] == "metrics_token_required"


def test_the_snippets_default_url_is_where_manage_py_gateway_listens(transactional_db) -> None:
    """Without GATEWAY_PUBLIC_URL, the model pages' snippets (``GATEWAY_PUBLIC_URL``,
    tests/gateway/test_placement.py) name the port ``manage.py gateway`` takes without ``--port``:
    both read GATEWAY_PORT (``make run`` passes it; they were 8080 and 8001 apart)."""
    port = free_port()
    env = {name: value for name, value in os.environ.items() if name != "GATEWAY_PUBLIC_URL"}
    env["GATEWAY_PORT"] = str(port)
    public_url = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c",
         "from django.conf import settings; print(settings.GATEWAY_PUBLIC_URL)"],
        cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert public_url == f"http://127.0.0.1:{port}"
    process = subprocess.Popen([sys.executable, "manage.py", "gateway", "--workers", "1"], cwd=settings.BASE_DIR,
                               env=env)
    try:
        wait_serving(f"{public_url}/healthz", "manage.py gateway at the snippets' URL", process=process)
        refused = requests.get(f"{public_url}/v1/models", timeout=5)
        assert (refused.status_code, openai_error(refused)["code"]) == (401, "invalid_api_key")
    finally:
        process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0
