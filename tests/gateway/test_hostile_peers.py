"""A hostile or broken backend, or client, costs the gateway bounded memory and time, and the
answers stay the gateway's own: real backend processes (devstack/openai_backend.py's hostile
modes) and raw sockets on the client side."""

from __future__ import annotations

import gzip
import socket

import pytest
import requests

from inference_gateway.models import BackendHost
from tests.clusters.conftest import wait_for
from tests.gateway.conftest import serve_model

pytestmark = pytest.mark.django_db(transaction=True)
CHAT = {"model": "team-a/m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def tight(gateway_settings):
    """Small caps and short timeouts, set before the gateway starts (list this fixture first). The
    upstream deadline stays long: an 8 MiB stream must pass whole however busy the machine is."""
    gateway_settings.GATEWAY_MAX_RESPONSE_BYTES = 1024 * 1024
    gateway_settings.GATEWAY_UPSTREAM_TIMEOUT_SECONDS = 120
    gateway_settings.GATEWAY_UPSTREAM_IDLE_SECONDS = 1
    gateway_settings.GATEWAY_CLIENT_TIMEOUT_SECONDS = 1
    return gateway_settings


def post(gateway, api_key: str, body: dict | bytes = CHAT, headers: dict | None = None, **options) -> requests.Response:
    headers = {"Authorization": f"Bearer {api_key}", **(headers or {})}
    if isinstance(body, bytes):
        return requests.post(f"{gateway.url}/v1/chat/completions", data=body, headers=headers, timeout=30, **options)
    return requests.post(f"{gateway.url}/v1/chat/completions", json=body, headers=headers, timeout=30, **options)


def test_an_answer_above_the_cap_is_a_502_and_a_stream_passes_whole(
        tight, cluster, gateway, api_key, start_backend) -> None:
    huge = start_backend("huge", hostile="huge", size=8 * 1024 * 1024)
    serve_model(cluster, "m", huge.url)
    answer = post(gateway, api_key)
    assert (answer.status_code, answer.json()["error"]["code"]) == (502, "upstream_response_too_large")
    assert "larger than 1048576 bytes" in answer.json()["error"]["message"]

    stream = start_backend("stream", hostile="stream", size=8 * 1024 * 1024)
    serve_model(cluster, "s", stream.url)
    with post(gateway, api_key, {**CHAT, "model": "team-a/s", "stream": True}, stream=True) as streamed:
        assert streamed.status_code == 200
        received = sum(len(chunk) for chunk in streamed.iter_content(65536))
    assert received == 8 * 1024 * 1024 + len(b"data: [DONE]\n\n")  # streams have no cap: back-pressure bounds them


def test_a_large_answer_under_the_cap_passes_whole(cluster, gateway, api_key, start_backend) -> None:
    """Written to the client in slices (server.WRITE_SLICE), every byte in order."""
    large = start_backend("large", hostile="huge", size=5 * 1024 * 1024 + 100)
    serve_model(cluster, "m", large.url)
    answer = post(gateway, api_key)
    assert answer.status_code == 200
    assert answer.content == b" " * (5 * 64 * 1024 * 16 + 64 * 1024) + b"{}"  # whole 64 KiB chunks, then "{}"


def test_a_client_leaving_a_never_ending_stream_ends_the_backends_call(
        cluster, gateway, api_key, start_backend) -> None:
    endless = start_backend("endless", hostile="endless")
    serve_model(cluster, "m", endless.url)
    with post(gateway, api_key, {**CHAT, "stream": True}, stream=True) as streamed:
        for index, _ in enumerate(streamed.iter_content(65536)):
            if index == 100:
                break
    wait_for(lambda: endless.stats().get("cancelled") == 1, timeout=30, message="the backend to see the cancel")


def test_a_client_that_stops_reading_is_dropped_and_so_is_the_backends_call(
        tight, cluster, gateway, api_key, start_backend) -> None:
    endless = start_backend("endless", hostile="endless")
    serve_model(cluster, "m", endless.url)
    body = b'{"model": "team-a/m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    with socket.create_connection(("127.0.0.1", gateway.port)) as client:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
                       + f"Authorization: Bearer {api_key}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        # never read: the gateway's writes stall, and after GATEWAY_CLIENT_TIMEOUT_SECONDS it gives up
        wait_for(lambda: endless.stats().get("cancelled") == 1, timeout=60, message="the stalled stream to be dropped")


def test_a_backend_slow_to_answer_is_a_504(tight, cluster, gateway, api_key, start_backend) -> None:
    slow = start_backend("slow", think=30)
    serve_model(cluster, "m", slow.url)
    answer = post(gateway, api_key)
    assert (answer.status_code, answer.json()["error"]["code"]) == (504, "upstream_timeout")
    assert "sent nothing for 1 s (GATEWAY_UPSTREAM_IDLE_SECONDS)" in answer.json()["error"]["message"]


def test_a_backend_silent_between_bytes_is_cut_at_the_idle_limit(
        tight, cluster, gateway, api_key, start_backend) -> None:
    stalled = start_backend("stalled", hostile="stall")  # headers and "{", then nothing
    serve_model(cluster, "m", stalled.url)
    answer = post(gateway, api_key)
    assert (answer.status_code, answer.json()["error"]["code"]) == (504, "upstream_timeout")
    assert "sent nothing for 1 s (GATEWAY_UPSTREAM_IDLE_SECONDS)" in answer.json()["error"]["message"]
    wait_for(lambda: stalled.stats().get("cancelled") == 1, timeout=30, message="the backend to see the cancel")


@pytest.fixture
def deadline(gateway_settings):
    """A short total deadline and an idle limit a byte every 0.1 s never reaches."""
    gateway_settings.GATEWAY_UPSTREAM_TIMEOUT_SECONDS = 3
    gateway_settings.GATEWAY_UPSTREAM_IDLE_SECONDS = 60
    return gateway_settings


def test_a_trickling_backend_is_cut_at_the_total_deadline(deadline, cluster, gateway, api_key, start_backend) -> None:
    trickle = start_backend("trickle", hostile="trickle", chunk_delay=0.1)  # a byte every 0.1 s, forever
    serve_model(cluster, "m", trickle.url)
    answer = post(gateway, api_key)
    assert (answer.status_code, answer.json()["error"]["code"]) == (504, "upstream_timeout")
    message = answer.json()["error"]["message"]
    assert "did not finish its answer within 3 s (GATEWAY_UPSTREAM_TIMEOUT_SECONDS)" in message
    wait_for(lambda: trickle.stats().get("cancelled") == 1, timeout=30, message="the backend to see the cancel")


def test_a_trickling_stream_is_ended_at_the_total_deadline(
        deadline, cluster, gateway, api_key, start_backend) -> None:
    trickle = start_backend("trickle", hostile="trickle-stream", chunk_delay=0.1)
    serve_model(cluster, "m", trickle.url)
    received = b""
    with post(gateway, api_key, {**CHAT, "stream": True}, stream=True) as streamed:
        assert streamed.status_code == 200
        with pytest.raises(requests.exceptions.ChunkedEncodingError):  # ended mid-body: never a made-up end
            for chunk in streamed.iter_content(None):
                received += chunk
    assert received.startswith(b'data: {"object": "chat.completion.chunk"')  # relayed while it lasted
    assert b"[DONE]" not in received
    wait_for(lambda: trickle.stats().get("cancelled") == 1, timeout=30, message="the backend to see the cancel")


def test_slow_header_clients_are_closed(tight, gateway) -> None:
    with socket.create_connection(("127.0.0.1", gateway.port)) as client:
        client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n")  # and never the rest
        client.settimeout(60)
        assert client.recv(1024) == b""  # closed by the gateway after GATEWAY_CLIENT_TIMEOUT_SECONDS


@pytest.mark.parametrize("status", [200, 401, 429])
def test_only_allowed_backend_headers_reach_the_client(
        gateway_settings, cluster, gateway, api_key, start_backend, status) -> None:
    """Whatever the status: cookies, CORS, auth challenges, locations, the backend's own rate
    limits and headers its Connection names hop-by-hop never pass (X-Hop although passed by name)."""
    gateway_settings.GATEWAY_PASSED_HEADERS = ["X-Backend", "X-Hop"]
    backend = start_backend("rude", hostile="headers", fail=status if status != 200 else 0)
    serve_model(cluster, "m", backend.url)
    answer = post(gateway, api_key)
    assert answer.status_code == status
    for name in ("Set-Cookie", "Location", "Alt-Svc", "X-Hop", "Access-Control-Allow-Origin",
                 "Access-Control-Allow-Credentials", "WWW-Authenticate", "Proxy-Authenticate",
                 "Strict-Transport-Security", "X-RateLimit-Remaining-Requests"):
        assert name not in answer.headers, name
    assert answer.headers["Content-Type"] == "application/json"  # the gateway's, without the foreign charset
    assert (answer.headers["X-Backend"], answer.headers["X-Request-Id"]) == ("rude", "engine-request-1")


def test_an_answer_no_openai_client_reads_is_a_502(cluster, gateway, api_key, start_backend) -> None:
    backend = start_backend("proxied", hostile="html")  # a proxy's HTML error page, with CORS
    serve_model(cluster, "m", backend.url)
    answer = post(gateway, api_key)
    assert (answer.status_code, answer.json()["error"]["code"]) == (502, "upstream_content_type")
    assert "answered 503 with Content-Type text/html" in answer.json()["error"]["message"]
    assert "Access-Control-Allow-Origin" not in answer.headers


def test_passing_a_header_no_backend_may_set_is_refused_at_start(settings) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from inference_gateway.conf import GatewaySettings

    settings.GATEWAY_PASSED_HEADERS = ["X-Engine", "Set-Cookie", "access-control-allow-origin"]
    with pytest.raises(ImproperlyConfigured) as refused:
        GatewaySettings.from_django()
    message = str(refused.value)
    assert "GATEWAY_PASSED_HEADERS: 'set-cookie' may never come from a backend: a backend's cookie" in message
    assert "'access-control-allow-origin' may never come from a backend: CORS" in message
    assert "x-engine" not in message


def test_a_backend_answer_in_bad_gzip_passes_as_sent(cluster, gateway, api_key, start_backend) -> None:
    backend = start_backend("zipper", hostile="bad-gzip")
    serve_model(cluster, "m", backend.url)
    with post(gateway, api_key, stream=True) as answer:
        assert answer.status_code == 200 and answer.headers["Content-Encoding"] == "gzip"
        assert answer.raw.read(decode_content=False) == b"this is not gzip"  # the client's to refuse, as sent


def test_a_redirect_is_never_followed_nor_passed_on(cluster, gateway, api_key, start_backend) -> None:
    inside = start_backend("inside")
    moved = start_backend("moved", redirect=inside.url)
    serve_model(cluster, "m", moved.url)
    answer = post(gateway, api_key, allow_redirects=False)
    assert (answer.status_code, answer.json()["error"]["code"]) == (502, "upstream_redirect")
    assert "Location" not in answer.headers
    assert "/v1/chat/completions" not in inside.stats()


def test_bad_request_bodies_and_encodings_are_400s(cluster, gateway, api_key, start_backend) -> None:
    backend = start_backend()
    serve_model(cluster, "m", backend.url)
    not_gzip = post(gateway, api_key, b'{"model": "team-a/m"}', {"Content-Encoding": "gzip",
                                                                 "Content-Type": "application/json"})
    assert (not_gzip.status_code, not_gzip.json()["error"]["code"]) == (400, "invalid_body")
    zipped = post(gateway, api_key, gzip.compress(b'{"model": "team-a/m", "messages": [{"content": "a b"}]}'),
                  {"Content-Encoding": "gzip", "Content-Type": "application/json"})
    assert zipped.status_code == 200, zipped.text
    too_big = post(gateway, api_key, b"x" * (33 * 1024 * 1024))
    assert (too_big.status_code, too_big.json()["error"]["code"]) == (413, "request_too_large")


def test_mirrored_models_with_refused_backends_are_not_routed(
        gateway_settings, cluster, gateway, api_key, start_backend) -> None:
    backend = start_backend()
    gateway_settings.GATEWAY_ALLOW_LOOPBACK = False
    serve_model(cluster, "loop", backend.url)  # mirrored from the cluster as it is: never validated
    serve_model(cluster, "meta", "http://169.254.169.254:80")
    serve_model(cluster, "file", "file:///etc/passwd")
    for name, rule in (("loop", "is loopback"), ("meta", "is a cloud metadata address"),
                       ("file", "must use http or https")):
        answer = post(gateway, api_key, {**CHAT, "model": f"team-a/{name}"})
        assert (answer.status_code, answer.json()["error"]["code"]) == (502, "backend_refused"), name
        assert rule in answer.json()["error"]["message"]
    assert "/v1/chat/completions" not in backend.stats()


def test_a_name_that_resolves_to_loopback_is_refused_when_connecting(
        gateway_settings, cluster, gateway, api_key, start_backend) -> None:
    """DNS rebinding: the name passes every rule by what it says, its address does not."""
    name = socket.gethostname()
    if not all(info[4][0].startswith("127.") for info in socket.getaddrinfo(name, None, socket.AF_INET)):
        pytest.skip(f"this host's name {name} does not resolve to loopback here")
    backend = start_backend(host="127.0.0.1")
    gateway_settings.GATEWAY_ALLOW_LOOPBACK = False
    BackendHost.objects.create(cluster=cluster, host=name)
    serve_model(cluster, "m", f"http://{name}:{backend.port}")
    answer = post(gateway, api_key)
    assert (answer.status_code, answer.json()["error"]["code"]) == (502, "backend_unreachable")
    assert f"{name} resolves to 127." in answer.json()["error"]["message"]
    assert "/v1/chat/completions" not in backend.stats()


def test_the_resolver_refuses_loopback_names() -> None:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from django.test import override_settings

    from inference_gateway.resolver import GuardedResolver, RefusedAddress

    async def lookup() -> None:
        await GuardedResolver().resolve("localhost", 80)

    def resolve() -> None:
        """On a thread of its own, as the gateway runs its loop: an event loop another test left
        running on this thread cannot refuse the call."""
        with ThreadPoolExecutor(1) as pool:
            pool.submit(lambda: asyncio.run(lookup())).result()

    with override_settings(GATEWAY_ALLOW_LOOPBACK=False), pytest.raises(RefusedAddress, match="which is loopback"):
        resolve()
    with override_settings(GATEWAY_ALLOW_LOOPBACK=True):
        resolve()  # development: loopback backends are fine


def test_a_deadline_turns_only_its_own_cancellation_into_a_timeout() -> None:
    """inference_gateway/deadlines.py: the sweep's cancel ends the block as TimeoutError; any other
    cancel (a client leaving cancels its handler) stays a cancellation; nothing stays due."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from inference_gateway.deadlines import Deadlines

    async def scenario() -> None:
        deadlines = Deadlines()
        sweeper = asyncio.ensure_future(deadlines.sweep())
        loop = asyncio.get_running_loop()

        async def bounded(seconds: float) -> None:
            with deadlines.at(loop.time() + seconds):
                await asyncio.sleep(3600)

        with pytest.raises(TimeoutError):
            await bounded(0.05)
        left = asyncio.ensure_future(bounded(3600))
        while not deadlines.due:  # until it awaits inside its block
            await asyncio.sleep(0)
        left.cancel()
        with pytest.raises(asyncio.CancelledError):
            await left
        assert not deadlines.due
        sweeper.cancel()

    with ThreadPoolExecutor(1) as pool:  # a loop of its own, whatever another test left on this thread
        pool.submit(lambda: asyncio.run(scenario())).result()
