"""The OpenAI API through the gateway, with the official client against real backend processes."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import time

import openai
import pytest
import requests
from django.conf import settings

from devstack.ports import free_port, wait_serving
from models_app.models import KubeAIModel, ModelService
from tests.clusters.conftest import wait_for
from tests.gateway.conftest import metrics_text, sample_value, serve_model, settles_at

pytestmark = pytest.mark.django_db(transaction=True)


def chat(client: openai.OpenAI, model: str, text: str = "hello gateway", **options):
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}], **options)


def test_chat_completion_and_embeddings_pass_through_with_metrics(cluster, gateway, api_key, start_backend) -> None:
    backend = start_backend("replica-a")
    serve_model(cluster, "meta-llama/Llama-3-8B", backend.url)
    client = gateway.client(api_key)
    llama = "team-a/meta-llama/Llama-3-8B"
    before = metrics_text(gateway)  # the gateway process serves the whole session: count this test's share

    def counted(name: str, **labels: str) -> float:
        return sample_value(metrics_text(gateway), name, **labels) - sample_value(before, name, **labels)

    answer = chat(client, "meta-llama/Llama-3-8B", "three little words", max_tokens=3)
    assert answer.choices[0].message.content == "three little words"
    assert answer.system_fingerprint == "replica-a"
    assert answer.usage.completion_tokens == 3

    completion = client.completions.create(model="meta-llama/Llama-3-8B", prompt="once upon a time", max_tokens=2)
    assert completion.choices[0].text == "once upon"

    embedding = client.embeddings.create(model="meta-llama/Llama-3-8B", input=["abc", "defgh"])
    assert [item.index for item in embedding.data] == [0, 1]
    assert embedding.data[0].embedding[:3] == pytest.approx([97 / 255, 98 / 255, 99 / 255])
    assert backend.stats()["/v1/embeddings"] == 1

    assert settles_at(lambda: counted("inference_portal_gateway_requests_total", model=llama, status="200"), 3)
    assert settles_at(lambda: counted("inference_portal_gateway_request_duration_seconds_count", model=llama), 3)
    assert settles_at(lambda: counted("inference_portal_gateway_time_to_first_token_seconds_count", model=llama), 3)
    # usage: chat 3+3, completion 4 prompt words capped to 2 tokens each way (2+2), embeddings 2+0
    assert settles_at(lambda: counted("inference_portal_gateway_tokens_total", model=llama, type="completion"), 5)
    assert settles_at(lambda: counted("inference_portal_gateway_tokens_total", model=llama, type="prompt"), 7)


def test_stream_passes_chunk_by_chunk(cluster, gateway, api_key, start_backend) -> None:
    backend = start_backend("slow", chunk_delay=0.3)
    serve_model(cluster, "streamer", backend.url)
    arrivals, words = [], []
    stream = chat(gateway.client(api_key), "streamer", "one two three four five", stream=True,
                  stream_options={"include_usage": True})
    for chunk in stream:
        arrivals.append(time.monotonic())
        if chunk.choices:
            words.append(chunk.choices[0].delta.content)
    assert "".join(words).split() == ["one", "two", "three", "four", "five"]
    # Buffered, every chunk would arrive at once after 1.2 s; passed through, they arrive 0.3 s apart.
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals[:5])]
    assert min(gaps) > 0.15, gaps
    assert chunk.usage.completion_tokens == 5
    assert settles_at(lambda: sample_value(metrics_text(gateway), "inference_portal_gateway_tokens_total",
                                           model="team-a/streamer", type="completion"), 5)  # fmt: skip


def test_client_disconnect_mid_stream_cancels_the_upstream_call(cluster, gateway, api_key, start_backend) -> None:
    backend = start_backend("long", chunk_delay=0.2)
    serve_model(cluster, "long-story", backend.url)
    stream = chat(gateway.client(api_key), "long-story", "word", stream=True, max_tokens=200)  # 40 s in full
    for index, _ in enumerate(stream):
        if index == 1:
            break
    stream.close()
    wait_for(lambda: backend.stats().get("cancelled") == 1, timeout=5, message="the backend to see the cancel")


def test_unknown_model_and_another_teams_model_answer_alike(cluster, gateway, api_key, start_backend) -> None:
    backend = start_backend()
    serve_model(cluster, "ours", backend.url, namespace="team-a")
    serve_model(cluster, "theirs", backend.url, namespace="team-b")
    client = gateway.client(api_key)

    assert [model.id for model in client.models.list()] == ["team-a/ours"]
    errors = {}
    for name in ("theirs", "nobody-has-this"):
        with pytest.raises(openai.NotFoundError) as caught:
            chat(client, name)
        errors[name] = caught.value
    assert {error.code for error in errors.values()} == {"model_not_found"}
    assert errors["theirs"].message.replace("theirs", "X") == errors["nobody-has-this"].message.replace(
        "nobody-has-this", "X")
    assert backend.stats().get("/v1/chat/completions") is None


def test_models_list_every_kind_with_features(cluster, gateway, api_key) -> None:
    serve_model(cluster, "llama", "http://llama.team-a.svc:8000")
    KubeAIModel.objects.create(cluster=cluster, namespace="team-a", name="nomic-embed", sync_state="Synced",
                               spec={"url": "ollama://nomic-embed-text", "engine": "OLlama",
                                     "features": ["TextEmbedding"]})
    ModelService.objects.create(cluster=cluster, namespace="team-a", name="qwen3", sync_state="Synced",
                                spec={"model": {"name": "Qwen/Qwen3-8B"}, "decode": {}})
    listed = requests.get(f"{gateway.url}/v1/models", headers={"Authorization": f"Bearer {api_key}"}, timeout=5).json()
    assert [(entry["id"], entry.get("features")) for entry in listed["data"]] == [
        ("team-a/Qwen/Qwen3-8B", None), ("team-a/llama", None), ("team-a/nomic-embed", ["TextEmbedding"])]


def test_backend_down_is_a_502_with_the_reason(cluster, gateway, api_key) -> None:
    serve_model(cluster, "down", "http://127.0.0.1:9")  # discard port: nothing listens
    with pytest.raises(openai.InternalServerError) as caught:
        chat(gateway.client(api_key), "down")
    assert caught.value.status_code == 502
    assert caught.value.code == "backend_unreachable"
    assert ("the backend of model team-a/down is unreachable: http://127.0.0.1:9: ClientConnectorError"
            in caught.value.message)


def test_a_cookie_set_by_a_backend_never_rides_on_a_later_request(cluster, gateway, api_key, start_backend) -> None:
    """The gateway's connections to a backend carry every caller's requests: a cookie one answer
    set must not go back with the next request (someone else's, maybe)."""
    backend = start_backend("sticky")
    serve_model(cluster, "sticky", f"http://localhost:{backend.port}")  # cookies of IP hosts are never kept anyway
    client = gateway.client(api_key)
    for _ in range(3):
        chat(client, "sticky")
    stats = backend.stats()
    assert stats["/v1/chat/completions"] == 3
    assert stats.get("with_cookie", 0) == 0


def test_requests_need_a_valid_portal_token(cluster, gateway, api_key) -> None:
    serve_model(cluster, "ours", "http://127.0.0.1:9")
    with pytest.raises(openai.AuthenticationError) as caught:
        chat(gateway.client("not-a-portal-token"), "ours")
    assert caught.value.code == "invalid_api_key"
    answer = requests.post(f"{gateway.url}/v1/chat/completions", json={"model": "ours"}, timeout=5)
    assert answer.status_code == 401
    assert answer.json()["error"]["message"].startswith("no API key")


def test_bad_bodies_are_400_with_the_field(gateway, api_key) -> None:
    headers = {"Authorization": f"Token {api_key}"}
    not_json = requests.post(f"{gateway.url}/v1/chat/completions", data=b"{", headers=headers, timeout=5)
    assert (not_json.status_code, not_json.json()["error"]["code"]) == (400, "invalid_json")
    no_model = requests.post(f"{gateway.url}/v1/embeddings", json={"input": "x"}, headers=headers, timeout=5)
    assert (no_model.status_code, no_model.json()["error"]["param"]) == (400, "model")


def test_manage_py_gateway_serves_until_sigterm() -> None:
    port = free_port()
    process = subprocess.Popen([sys.executable, "manage.py", "gateway", "--host", "127.0.0.1", "--port", str(port)],
                               cwd=settings.BASE_DIR)
    try:
        wait_serving(f"http://127.0.0.1:{port}/healthz", "manage.py gateway", process=process)
        refused = requests.get(f"http://127.0.0.1:{port}/v1/models", timeout=5)
        assert (refused.status_code, refused.json()["error"]["code"]) == (401, "invalid_api_key")
    finally:
        process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0
