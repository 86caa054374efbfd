"""KubeAI's ``PrefixHash``: consistent hashing with bounded loads (CHWBL), as KubeAI's own load
balancer does it (kubeai-project/kubeai, internal/loadbalancer/balance_chwbl.go; read, not copied).

Each replica stands on a hash ring ``replication`` times (the hash of its name and the copy's
number). A request's key is its LoRA adapter's name followed by the first ``prefixCharLength``
characters of its first user message (a chat) or of its prompt (a completion), as KubeAI's
``Prefix()`` takes them; from the key's hash the ring is walked clockwise, and the first replica
whose requests in flight are at most ``meanLoadFactor`` percent of the mean (counting the new
request: ``(total + 1) / replicas``) takes it. When none is under its bound, the first replica
met takes it anyway (KubeAI's "default endpoint"). KubeAI loads every adapter of a Model into each
of its replicas, so every replica may serve the request's adapter.

The hash is the first 8 bytes of BLAKE2b (KubeAI uses xxHash): stable across processes, so every
gateway worker places a prefix on the same replica; Python's own ``hash`` is salted per process.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class Loaded(Protocol):
    url: str
    outstanding: int


def stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


@dataclass(frozen=True)
class PrefixHashSpec:
    """``spec.loadBalancing.prefixHash`` with KubeAI's defaults."""

    mean_load_factor: int = 125
    replication: int = 256
    prefix_char_length: int = 100


class Ring:
    """The ring of one set of replicas (rebuilt only when the set changes)."""

    def __init__(self, urls: Sequence[str], replication: int) -> None:
        self.urls = tuple(urls)
        points = sorted((stable_hash(f"{url}{copy}"), url) for url in self.urls for copy in range(replication))
        self.hashes = [point for point, _ in points]
        self.owners = [url for _, url in points]

    def pick(self, key: str, replicas: Sequence[Loaded], load_factor: float) -> tuple[Loaded, bool] | None:
        """The replica for ``key`` and whether it was within its bound (False: every replica was
        over it, the first met takes the request). ``replicas``: the ones that may take it now."""
        if not self.hashes or not replicas:
            return None
        by_url = {replica.url: replica for replica in replicas}
        total = sum(replica.outstanding for replica in by_url.values())
        bound = (total + 1) / len(by_url) * load_factor
        start = bisect.bisect_left(self.hashes, stable_hash(key))
        first, seen = None, set()
        count = len(self.hashes)
        for step in range(count):
            url = self.owners[(start + step) % count]
            if url in seen:
                continue
            seen.add(url)
            replica = by_url.get(url)
            if replica is None:
                continue
            if first is None:
                first = replica
            if total == 0 or replica.outstanding <= bound:
                return replica, True
            if len(seen) == len(self.urls):
                break
        return (first, False) if first is not None else None
