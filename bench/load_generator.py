"""The gateway benchmark's load generator, a process of its own so its CPU is not the gateway's.

``python -m bench.load_generator URL KEY SECONDS CLIENTS OUT [--stream] [--pause-ms MS] [--seed N]``:
``CLIENTS`` concurrent clients (aiohttp on uvloop, one keep-alive connection each) post one chat
completion after another to ``URL`` for ``SECONDS``; writes JSON with the requests per second and
every latency (for ``--stream``, the time to the first SSE chunk) in milliseconds to ``OUT``.

**Each client pauses between its requests**, a random time (exponential, mean ``--pause-ms``,
from a generator seeded by ``--seed`` and the client's number, so both arms of a comparison draw
the same pauses). Without a pause the clients move in lockstep: they start together, the backend
takes the same time for each, so all of them answer in the same instant and send again in the same
instant, and every component handles them as one burst, serially, the last one waiting for the
other 63 (about 6 ms at the test backend's 0.1 ms of CPU per request). A component in the middle
that is slower per request (the gateway) spreads each burst out, so the backend behind it sees a
smooth stream and no burst: that made the gateway look faster than the backend called directly.
Random pauses break the lockstep in both arms alike; even a mean of 1-2 ms is enough.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from pathlib import Path

import aiohttp
import uvloop

BODY = json.dumps({"model": "bench", "max_tokens": 4,
                   "messages": [{"role": "user", "content": "how fast is the gateway"}]}).encode()
STREAM_BODY = json.dumps({"model": "bench", "max_tokens": 4, "stream": True,
                          "messages": [{"role": "user", "content": "how fast is the gateway"}]}).encode()
WARM_UP_SECONDS = 0.5  # connections opened, caches filled, before anything is counted


async def client(session: aiohttp.ClientSession, url: str, headers: dict, stream: bool, until: float,
                 pauses: random.Random, pause_seconds: float, samples: list[float]) -> None:
    body = STREAM_BODY if stream else BODY
    while True:
        if pause_seconds:
            await asyncio.sleep(pauses.expovariate(1 / pause_seconds))
        if time.perf_counter() >= until:
            return
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


async def measure(url: str, key: str, seconds: float, clients: int, stream: bool, pause_seconds: float,
                  seed: int) -> dict:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    samples: list[float] = []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def run_all(until: float, into: list[float], round_seed: int) -> None:
            await asyncio.gather(*(
                client(session, url, headers, stream, until, random.Random(round_seed * 1000 + number),
                       pause_seconds, into)
                for number in range(clients)
            ))

        await run_all(time.perf_counter() + WARM_UP_SECONDS, [], seed + 1)
        started = time.perf_counter()
        await run_all(started + seconds, samples, seed)
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
    parser.add_argument("--pause-ms", type=float, default=0.0, help="mean pause of a client between requests")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    result = uvloop.run(measure(args.url, args.key, args.seconds, args.clients, args.stream,
                                args.pause_ms / 1000, args.seed))
    args.out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
