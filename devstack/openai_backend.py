"""A small OpenAI-compatible inference server (aiohttp), run as a real process by the gateway's
tests and benchmark (``python -m devstack.openai_backend --host 127.0.0.2 --port 9000 --name a``)
and as the live demo's model server (``manage.py demo_backend --port 9000``).

It answers like vLLM would, deterministically: a chat or completion echoes the last message (one
token per word, ``max_tokens`` of them at most), streamed as Server-Sent Events one token per chunk
(``--chunk-delay`` seconds apart, so a test can disconnect mid-stream), after ``--think`` seconds
(the time a model takes before its first token); an embedding is a vector
derived from the input's bytes. Every answer names the replica (``system_fingerprint`` and the
``X-Backend`` header), so a test sees which one served it, and sets a cookie (as a replica behind
a sticky load balancer would). ``GET /stats`` reports how many requests each route saw, how many
came with a cookie (``with_cookie``) and how many streams ended because the client went away
(``cancelled``). ``--redirect URL`` answers every generation with a 307 to ``URL`` + its path.
A body that is not a request it understands is a 400, as vLLM answers.

``--hostile MODE`` makes it a backend the gateway must survive (``--size`` bytes where it matters):
``huge`` a JSON answer of ``--size`` bytes without Content-Length; ``stream`` an SSE stream of
``--size`` bytes, 64 KiB per event; ``endless`` an SSE stream that never ends; ``bad-gzip`` an
answer labelled ``Content-Encoding: gzip`` that is not gzip; ``headers`` an answer (status
``--fail``, else 200) with ``Set-Cookie``, ``Location``, ``Alt-Svc``, CORS, auth challenges, its own
``x-ratelimit-*``, a Content-Type with a foreign charset and a header its ``Connection`` names
hop-by-hop; ``html`` a 503 HTML error page (a proxy's in front of the engine); ``stall`` a JSON
answer's headers and first bytes, then silence; ``trickle`` a JSON answer sent one byte every
``--chunk-delay`` seconds, ``trickle-stream`` an SSE stream of one small event every
``--chunk-delay`` seconds, never ending; ``no-usage`` its usual answers, but a stream never ends
with a usage chunk, asked for or not (an engine without ``stream_options``).

Once listening it prints one line, ``listening on http://HOST:PORT``; with ``--port 0`` the kernel
picks the port, so whoever started it reads the port from that line and no other process can hold
it in between.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import time
from typing import Any

from aiohttp import web

STATS = web.AppKey("stats", dict)
NAME = web.AppKey("name", str)
DELAY = web.AppKey("delay", float)
THINK = web.AppKey("think", float)
FAIL = web.AppKey("fail", int)
REDIRECT = web.AppKey("redirect", str)
HOSTILE = web.AppKey("hostile", str)
SIZE = web.AppKey("size", int)
EVENT = b"data: " + b"x" * (64 * 1024 - 8) + b"\n\n"  # one 64 KiB SSE event
TRICKLED_EVENT = b'data: {"object": "chat.completion.chunk", "choices": []}\n\n'
HOSTILE_MODES = ("", "huge", "stream", "endless", "bad-gzip", "headers", "html", "stall", "trickle", "trickle-stream",
                 "no-usage")
HOSTILE_HEADERS = {
    "Content-Type": "application/json; charset=utf-7",
    "Set-Cookie": "session=stolen; Path=/",
    "Location": "http://127.0.0.1:1/internal",
    "Alt-Svc": 'h3=":443"',
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Credentials": "true",
    "WWW-Authenticate": 'Basic realm="engine"',
    "Proxy-Authenticate": 'Basic realm="proxy"',
    "Strict-Transport-Security": "max-age=31536000",
    "X-RateLimit-Remaining-Requests": "999999",
    "Connection": "X-Hop",
    "X-Hop": "secret",
    "X-Request-Id": "engine-request-1",
}


def answer_words(body: dict[str, Any]) -> list[str]:
    last = (body.get("messages") or [{}])[-1].get("content", "") if "messages" in body else body.get("prompt", "")
    text = str(last)
    words = text.split() or ["ok"]
    limit = body.get("max_tokens") or len(words)
    if not isinstance(limit, int) or not 0 < limit <= 100_000:
        raise ValueError(f"max_tokens must be an integer from 1 to 100000, not {limit!r}")
    return [words[index % len(words)] for index in range(limit)]


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def completion_body(ident: str, chat: bool, created: int, model: Any, name: str, words: list[str],
                    counted: dict[str, int]) -> dict[str, Any]:
    """A whole answer as OpenAI writes it (``chat.completion`` or ``text_completion``)."""
    text = " ".join(words)
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop", "logprobs": None}
    choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
    return {"id": ident, "object": "chat.completion" if chat else "text_completion", "created": created,
            "model": model, "system_fingerprint": name, "choices": [choice], "usage": counted}


def chunk_body(ident: str, chat: bool, created: int, model: Any, name: str, word: str) -> dict[str, Any]:
    """One token of a streamed answer as OpenAI writes it."""
    choice: dict[str, Any] = {"index": 0, "finish_reason": None, "logprobs": None}
    choice.update({"delta": {"content": word + " "}} if chat else {"text": word + " "})
    return {"id": ident, "object": "chat.completion.chunk" if chat else "text_completion", "created": created,
            "model": model, "system_fingerprint": name, "choices": [choice]}


async def models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "any", "object": "model", "owned_by": "test"}]})


async def generate(request: web.Request) -> web.StreamResponse:
    try:
        body = await request.json()
        answer_words(body)
        if not isinstance(body.get("stream_options") or {}, dict):
            raise ValueError("stream_options must be an object")
    except Exception as error:  # any body it cannot read is the client's error
        return bad_request(error)
    if request.app[HOSTILE] and request.app[HOSTILE] != "no-usage":
        return await hostile(request, request.app[HOSTILE], request.app[SIZE])
    return await _generate(request, body)


async def hostile(request: web.Request, mode: str, size: int) -> web.StreamResponse:
    """The answers of a broken or malicious backend (see the module's docstring)."""
    stats = request.app[STATS]
    stats[mode] = stats.get(mode, 0) + 1
    if mode == "bad-gzip":
        return web.Response(body=b"this is not gzip", headers={"Content-Encoding": "gzip",
                                                                "Content-Type": "application/json"})
    if mode == "headers":
        return web.Response(body=b'{"object": "chat.completion", "choices": []}', status=request.app[FAIL] or 200,
                            headers=HOSTILE_HEADERS | {"X-Backend": request.app[NAME]})
    if mode == "html":
        return web.Response(status=503, text="<html><body><h1>503 Service Unavailable</h1></body></html>",
                            content_type="text/html", headers={"Access-Control-Allow-Origin": "*"})
    if mode in ("stall", "trickle", "trickle-stream"):
        return await _trickle(request, mode)
    event_stream = mode in ("stream", "endless")
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream" if event_stream else "application/json"})
    await response.prepare(request)
    chunk = EVENT if event_stream else b" " * len(EVENT)
    sent = 0
    try:
        while mode == "endless" or sent < size:
            await response.write(chunk)
            sent += len(chunk)
        await response.write(b"data: [DONE]\n\n" if event_stream else b"{}")
    except (asyncio.CancelledError, ConnectionError):
        stats["cancelled"] = stats.get("cancelled", 0) + 1
        raise
    return response


async def _trickle(request: web.Request, mode: str) -> web.StreamResponse:
    """Headers and a first byte at once, then one byte (``trickle-stream``: one small event) every
    ``--chunk-delay`` seconds (``stall``: none), until the client goes away (counted as
    ``cancelled``; aiohttp cancels no handler when its client leaves, so ``stall`` looks at its
    connection)."""
    stats = request.app[STATS]
    response = web.StreamResponse(headers={
        "Content-Type": "text/event-stream" if mode == "trickle-stream" else "application/json"})
    await response.prepare(request)
    try:
        piece = TRICKLED_EVENT if mode == "trickle-stream" else b" "
        await response.write(piece if mode == "trickle-stream" else b"{")
        while True:
            await asyncio.sleep(request.app[DELAY] or 0.05)
            if mode != "stall":
                await response.write(piece)
            elif request.transport is None or request.transport.is_closing():  # seen without a write
                raise ConnectionResetError("the client went away")
    except (asyncio.CancelledError, ConnectionError):
        stats["cancelled"] = stats.get("cancelled", 0) + 1
        raise


async def _generate(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
    chat = request.path.endswith("/chat/completions")
    stats, name = request.app[STATS], request.app[NAME]
    stats[request.path] = stats.get(request.path, 0) + 1
    if "Cookie" in request.headers:
        stats["with_cookie"] = stats.get("with_cookie", 0) + 1
    if request.app[REDIRECT]:
        raise web.HTTPTemporaryRedirect(request.app[REDIRECT] + request.path)
    if request.app[FAIL]:  # a broken or overloaded engine: it answers, with an error
        error = {"message": f"{name} is failing", "type": "server_error", "code": None, "param": None}
        return web.json_response({"error": error}, status=request.app[FAIL], headers={"X-Backend": name})
    words = answer_words(body)
    if request.app[THINK]:
        await asyncio.sleep(request.app[THINK])
    created, ident = int(time.time()), f"cmpl-{name}-{stats[request.path]}"
    headers = {"X-Backend": name, "Set-Cookie": f"replica={name}; Path=/"}
    if "traceparent" in request.headers:  # the trace context it was called in (W3C), shown to the test
        headers["X-Received-Traceparent"] = request.headers["traceparent"]
    if not body.get("stream"):
        return web.json_response(completion_body(ident, chat, created, body.get("model"), name, words,
                                                 usage(len(words), len(words))), headers=headers)
    response = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream"})
    await response.prepare(request)
    try:
        for index, word in enumerate(words):
            chunk = chunk_body(ident, chat, created, body.get("model"), name, word)
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            if index < len(words) - 1 and request.app[DELAY]:
                await asyncio.sleep(request.app[DELAY])
        if (body.get("stream_options") or {}).get("include_usage") and request.app[HOSTILE] != "no-usage":
            last = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": body.get("model"),
                    "choices": [], "usage": usage(len(words), len(words))}
            await response.write(b"data: " + json.dumps(last).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
    except (asyncio.CancelledError, ConnectionResetError):
        stats["cancelled"] = stats.get("cancelled", 0) + 1
        raise
    return response


def bad_request(error: Exception) -> web.Response:
    return web.json_response({"error": {"message": f"bad request: {error}", "type": "invalid_request_error",
                                        "code": None, "param": None}}, status=400)


async def embeddings(request: web.Request) -> web.Response:
    try:
        body = await request.json()
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
    except Exception as error:  # any body it cannot read is the client's error
        return bad_request(error)
    stats = request.app[STATS]
    stats[request.path] = stats.get(request.path, 0) + 1
    data = [
        {"object": "embedding", "index": index, "embedding": [byte / 255 for byte in str(text).encode()[:8].ljust(8)]}
        for index, text in enumerate(inputs)
    ]
    tokens = sum(len(str(text).split()) for text in inputs)
    return web.json_response(
        {"object": "list", "model": body.get("model"), "data": data, "usage": usage(tokens, 0)},
        headers={"X-Backend": request.app[NAME]},
    )


async def stats_view(request: web.Request) -> web.Response:
    return web.json_response(request.app[STATS])


def make_app(name: str, chunk_delay: float, think: float = 0.0, fail: int = 0, redirect: str = "",
             hostile: str = "", size: int = 0) -> web.Application:
    app = web.Application()
    app[STATS], app[NAME], app[DELAY], app[THINK], app[FAIL] = {}, name, chunk_delay, think, fail
    app[REDIRECT], app[HOSTILE], app[SIZE] = redirect, hostile, size
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", generate)
    app.router.add_post("/v1/completions", generate)
    app.router.add_post("/v1/embeddings", embeddings)
    app.router.add_get("/stats", stats_view)
    return app


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The server's options, for ``python -m devstack.openai_backend`` and ``manage.py demo_backend``."""
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True, help="0: any free port, announced on stdout")
    parser.add_argument("--name", default="backend")
    parser.add_argument("--chunk-delay", type=float, default=0.0)
    parser.add_argument("--think", type=float, default=0.0, help="seconds before the first token (a model's prefill)")
    parser.add_argument("--fail", type=int, default=0, help="answer every generation with this HTTP status")
    parser.add_argument("--redirect", default="", help="answer every generation with a 307 to this URL + its path")
    parser.add_argument("--hostile", default="", choices=HOSTILE_MODES,
                        help="misbehave as a broken or hostile backend would (the gateway's tests)")
    parser.add_argument("--size", type=int, default=0, help="bytes of a huge or stream answer")


def serve(host: str, port: int, name: str, chunk_delay: float, think: float = 0.0, fail: int = 0,
          redirect: str = "", hostile: str = "", size: int = 0) -> None:
    """Serve until interrupted (SIGINT or SIGTERM)."""
    app = make_app(name, chunk_delay, think, fail, redirect, hostile, size)
    listener = socket.create_server((host, port))
    print(f"listening on http://{host}:{listener.getsockname()[1]}", flush=True)
    web.run_app(app, sock=listener, print=None, access_log=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args()
    serve(args.host, args.port, args.name, args.chunk_delay, args.think, args.fail, args.redirect, args.hostile,
          args.size)


if __name__ == "__main__":
    main()
