"""The gateway benchmark's load generator, a process of its own so its CPU is not the gateway's.

``python -m bench.load_generator URL KEY SECONDS CLIENTS OUT [--stream]``: ``CLIENTS`` concurrent
clients (aiohttp on uvloop, one keep-alive connection each) post one chat completion after
another to ``URL`` for ``SECONDS``; writes JSON with the requests per second and every latency
(for ``--stream``, the time to the first SSE chunk) in milliseconds to the file ``OUT``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import aiohttp
import uvloop

BODY = json.dumps({"model": "bench", "max_tokens": 4,
                   "messages": [{"role": "user", "content": "how fast is the gateway"}]}).encode()
STREAM_BODY = json.dumps({"model": "bench", "max_tokens": 4, "stream": True,
                          "messages": [{"role": "user", "content": "how fast is the gateway"}]}).encode()


async def client(session: aiohttp.ClientSession, url: str, headers: dict, stream: bool, until: float,
                 samples: list[float]) -> None:
    body = STREAM_BODY if stream else BODY
    while time.perf_counter() < until:
        started = time.perf_counter()
        async with session.post(url, data=body, headers=headers) as response:
            if response.status != 200:
                raise RuntimeError(f"{url}: {response.status} {await response.text()}")
            if stream:
                await response.content.readany()
                samples.append((time.perf_counter() - started) * 1000)
                await response.read()
            else:
                await response.read()
                samples.append((time.perf_counter() - started) * 1000)


async def measure(url: str, key: str, seconds: float, clients: int, stream: bool) -> dict:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    samples: list[float] = []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        until = time.perf_counter() + 0.5  # warm-up: connections opened, caches filled
        await asyncio.gather(*(client(session, url, headers, stream, until, []) for _ in range(clients)))
        started = time.perf_counter()
        until = started + seconds
        await asyncio.gather(*(client(session, url, headers, stream, until, samples) for _ in range(clients)))
        elapsed = time.perf_counter() - started
    return {"rps": len(samples) / elapsed, "latencies_ms": samples}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("key")
    parser.add_argument("seconds", type=float)
    parser.add_argument("clients", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--stream", action="store_true")
    args = parser.parse_args()
    result = uvloop.run(measure(args.url, args.key, args.seconds, args.clients, args.stream))
    args.out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
