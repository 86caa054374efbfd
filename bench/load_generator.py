"""The gateway benchmark's load generator, a process of its own so its CPU is not the gateway's.

``python -m bench.load_generator KEY SECONDS CLIENTS OUT --url A --url B [--stream] [--pause-ms MS]
[--seed N] [--slice-seconds S]``: ``CLIENTS`` concurrent clients (aiohttp on uvloop, one
keep-alive connection each per URL, kept across slices) post one chat completion after another
for ``SECONDS`` in all, to one URL at a time: the two URLs take turns in slices of ``S`` seconds
(A B B A A B B A ...), so both see the same machine: a load that comes and goes on a shared machine
falls on both alike, which whole runs one after the other (5 s each) did not achieve. Writes JSON
to ``OUT``: per URL, the requests per second over its slices and every latency in milliseconds
(for ``--stream``, the time to the first SSE chunk).

**Each client pauses between its requests**, a random time (exponential, mean ``--pause-ms``, from a
generator seeded by ``--seed``, the pair of slices and the client's number: the two URLs of a pair
draw the same pauses). Without a pause the clients move in lockstep: they start together, the
backend takes the same time for each, so all of them answer in the same instant and send again in
the same instant, and every component handles them as one burst, serially, the last one waiting for
the other 63 (about 6 ms at the test backend's 0.1 ms of CPU per request). A component in the middle
that is slower per request (the gateway) spreads each burst out, so the backend behind it sees a
smooth stream and no burst: that made the gateway look faster than the backend called directly.
Random pauses break the lockstep for every URL alike; even a mean of 1-2 ms is enough.
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
        if pause_seconds:  # not past the slice's end
            await asyncio.sleep(min(pauses.expovariate(1 / pause_seconds), max(0.0, until - time.perf_counter())))
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


async def measure(urls: list[str], key: str, seconds: float, clients: int, stream: bool, pause_seconds: float,
                  seed: int, slice_seconds: float) -> list[dict]:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    samples: dict[str, list[float]] = {url: [] for url in urls}
    spent = dict.fromkeys(urls, 0.0)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def run_all(url: str, until: float, into: list[float], slice_seed: int) -> None:
            await asyncio.gather(*(
                client(session, url, headers, stream, until, random.Random(slice_seed * 1000 + number),
                       pause_seconds, into)
                for number in range(clients)
            ))

        for url in urls:
            await run_all(url, time.perf_counter() + WARM_UP_SECONDS, [], -1)
        for number in range(max(2, round(seconds / slice_seconds))):
            url = urls[(number + number // 2) % 2]  # A B B A A B ...
            started = time.perf_counter()
            # the two slices of a pair draw the same pauses
            await run_all(url, started + slice_seconds, samples[url], seed * 10_000 + number // 2)
            spent[url] += time.perf_counter() - started
    return [{"url": url, "rps": len(samples[url]) / spent[url], "latencies_ms": samples[url]} for url in urls]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("key")
    parser.add_argument("seconds", type=float, help="in all, every URL's slices together")
    parser.add_argument("clients", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--url", action="append", required=True, help="twice: the two URLs take turns")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--pause-ms", type=float, default=0.0, help="mean pause of a client between requests")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--slice-seconds", type=float, default=1.0)
    args = parser.parse_args()
    if len(args.url) != 2:
        parser.error("--url: give exactly two URLs")
    result = uvloop.run(measure(args.url, args.key, args.seconds, args.clients, args.stream,
                                args.pause_ms / 1000, args.seed, args.slice_seconds))
    args.out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
