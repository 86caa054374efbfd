"""A small OpenAI-compatible inference server (aiohttp), run as a real process by the gateway's
tests and benchmark: ``python -m tests.support.openai_backend --host 127.0.0.2 --port 9000 --name a``.

It answers like vLLM would, deterministically: a chat or completion echoes the last message (one
token per word, ``max_tokens`` of them at most), streamed as Server-Sent Events one token per chunk
(``--chunk-delay`` seconds apart, so a test can disconnect mid-stream), after ``--think`` seconds
(the time a model takes before its first token); an embedding is a vector
derived from the input's bytes. Every answer names the replica (``system_fingerprint`` and the
``X-Backend`` header), so a test sees which one served it, and sets a cookie (as a replica behind
a sticky load balancer would). ``GET /stats`` reports how many requests each route saw, how many
came with a cookie (``with_cookie``) and how many streams ended because the client went away
(``cancelled``). ``--redirect URL`` answers every generation with a 307 to ``URL`` + its path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from aiohttp import web

STATS = web.AppKey("stats", dict)
NAME = web.AppKey("name", str)
DELAY = web.AppKey("delay", float)
THINK = web.AppKey("think", float)
FAIL = web.AppKey("fail", int)
REDIRECT = web.AppKey("redirect", str)


def _words(body: dict[str, Any]) -> list[str]:
    last = (body.get("messages") or [{}])[-1].get("content", "") if "messages" in body else body.get("prompt", "")
    text = str(last)
    words = text.split() or ["ok"]
    limit = body.get("max_tokens") or len(words)
    return [words[index % len(words)] for index in range(limit)]


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "any", "object": "model", "owned_by": "test"}]})


async def generate(request: web.Request) -> web.StreamResponse:
    chat = request.path.endswith("/chat/completions")
    body = await request.json()
    stats, name = request.app[STATS], request.app[NAME]
    stats[request.path] = stats.get(request.path, 0) + 1
    if "Cookie" in request.headers:
        stats["with_cookie"] = stats.get("with_cookie", 0) + 1
    if request.app[REDIRECT]:
        raise web.HTTPTemporaryRedirect(request.app[REDIRECT] + request.path)
    if request.app[FAIL]:  # a broken or overloaded engine: it answers, with an error
        error = {"message": f"{name} is failing", "type": "server_error", "code": None, "param": None}
        return web.json_response({"error": error}, status=request.app[FAIL], headers={"X-Backend": name})
    words = _words(body)
    if request.app[THINK]:
        await asyncio.sleep(request.app[THINK])
    created, ident = int(time.time()), f"cmpl-{name}-{stats[request.path]}"
    headers = {"X-Backend": name, "Set-Cookie": f"replica={name}; Path=/"}
    if "traceparent" in request.headers:  # the trace context it was called in (W3C), shown to the test
        headers["X-Received-Traceparent"] = request.headers["traceparent"]
    if not body.get("stream"):
        text = " ".join(words)
        choice = {"index": 0, "finish_reason": "stop", "logprobs": None}
        choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
        return web.json_response(
            {
                "id": ident,
                "object": "chat.completion" if chat else "text_completion",
                "created": created,
                "model": body.get("model"),
                "system_fingerprint": name,
                "choices": [choice],
                "usage": _usage(len(words), len(words)),
            },
            headers=headers,
        )
    response = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream"})
    await response.prepare(request)
    try:
        for index, word in enumerate(words):
            delta = {"content": word + " "} if chat else None
            choice = {"index": 0, "finish_reason": None, "logprobs": None}
            choice.update({"delta": delta} if chat else {"text": word + " "})
            chunk = {
                "id": ident,
                "object": "chat.completion.chunk" if chat else "text_completion",
                "created": created,
                "model": body.get("model"),
                "system_fingerprint": name,
                "choices": [choice],
            }
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            if index < len(words) - 1 and request.app[DELAY]:
                await asyncio.sleep(request.app[DELAY])
        if (body.get("stream_options") or {}).get("include_usage"):
            last = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": body.get("model"),
                    "choices": [], "usage": _usage(len(words), len(words))}
            await response.write(b"data: " + json.dumps(last).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
    except (asyncio.CancelledError, ConnectionResetError):
        stats["cancelled"] = stats.get("cancelled", 0) + 1
        raise
    return response


async def embeddings(request: web.Request) -> web.Response:
    body = await request.json()
    stats = request.app[STATS]
    stats[request.path] = stats.get(request.path, 0) + 1
    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
    data = [
        {"object": "embedding", "index": index, "embedding": [byte / 255 for byte in str(text).encode()[:8].ljust(8)]}
        for index, text in enumerate(inputs)
    ]
    tokens = sum(len(str(text).split()) for text in inputs)
    return web.json_response(
        {"object": "list", "model": body.get("model"), "data": data, "usage": _usage(tokens, 0)},
        headers={"X-Backend": request.app[NAME]},
    )


async def stats_view(request: web.Request) -> web.Response:
    return web.json_response(request.app[STATS])


def make_app(name: str, chunk_delay: float, think: float = 0.0, fail: int = 0, redirect: str = "") -> web.Application:
    app = web.Application()
    app[STATS], app[NAME], app[DELAY], app[THINK], app[FAIL] = {}, name, chunk_delay, think, fail
    app[REDIRECT] = redirect
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", generate)
    app.router.add_post("/v1/completions", generate)
    app.router.add_post("/v1/embeddings", embeddings)
    app.router.add_get("/stats", stats_view)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", default="backend")
    parser.add_argument("--chunk-delay", type=float, default=0.0)
    parser.add_argument("--think", type=float, default=0.0, help="seconds before the first token (a model's prefill)")
    parser.add_argument("--fail", type=int, default=0, help="answer every generation with this HTTP status")
    parser.add_argument("--redirect", default="", help="answer every generation with a 307 to this URL + its path")
    args = parser.parse_args()
    app = make_app(args.name, args.chunk_delay, args.think, args.fail, args.redirect)
    web.run_app(app, host=args.host, port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
