"""The prompt's prefix as the gateway can see it, and what it has sent each replica.

**Fingerprint.** A chat's messages are its natural blocks (the system prompt, then each turn): each
is named by a hash chained over its role, its text and the previous one's hash (as vLLM chains its
KV blocks' hashes), and weighs its length. A completion's prompt is cut at fixed character
positions growing geometrically (256, 512, 768, 1 Ki, 1.5 Ki, ... 64 Ki), chained the same way.
Why not llm-d's fixed blocks of 64 characters: hashing a 50,000-character prompt in 256-character
blocks in Python cost 26-42 us of CPU a request (measured here), most of the scorer's whole budget
of 50; a conversation's prefix grows by whole messages, so message blocks lose nothing on chat
traffic, and a long single prompt keeps a resolution of a third of its length.

**Index.** Per replica, the block hashes the gateway has sent it (llm-d's approximate prefix
cache: what was sent is taken as cached). Two generations stand for an LRU: hashes go into the
current one; when it holds ``capacity / 2`` it becomes the previous and a new one starts, so the
index keeps between half and all of ``capacity`` most recent blocks at a constant cost. A replica's
match is the longest run of leading blocks it holds: chained hashes make that monotone, so it is
found by binary search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CUTS = (256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152, 65536)
DEFAULT_CAPACITY = 31_250  # blocks a replica's index keeps (llm-d's lruCapacityPerServer)


@dataclass(frozen=True)
class Fingerprint:
    hashes: tuple[int, ...]
    ends: tuple[int, ...]  # characters up to the end of each block

    @property
    def size(self) -> int:
        return self.ends[-1] if self.ends else 0


EMPTY = Fingerprint((), ())


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI's content parts
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def fingerprint(data: dict[str, Any]) -> Fingerprint:
    """The request body's prefix blocks (see the module's docstring)."""
    messages = data.get("messages")
    if isinstance(messages, list):
        hashes, ends, parent, end = [], [], 0, 0
        for message in messages:
            if not isinstance(message, dict):
                break
            role, text = message.get("role"), _text(message.get("content"))
            parent = hash((parent, role, text))
            end += len(text) + 1
            hashes.append(parent)
            ends.append(end)
        return Fingerprint(tuple(hashes), tuple(ends))
    prompt = data.get("prompt")
    if isinstance(prompt, list):
        prompt = prompt[0] if prompt and isinstance(prompt[0], str) else ""
    if not isinstance(prompt, str):
        return EMPTY
    hashes, ends, parent, start = [], [], 0, 0
    for cut in CUTS:
        stop = min(cut, len(prompt))
        if stop <= start:
            break
        parent = hash((parent, prompt[start:stop]))
        hashes.append(parent)
        ends.append(stop)
        start = stop
    return Fingerprint(tuple(hashes), tuple(ends))


def kubeai_prefix(data: dict[str, Any], length: int) -> str:
    """KubeAI's ``Prefix(n)``: the first ``length`` characters of a chat's first user message, or of
    a completion's (first) prompt."""
    messages = data.get("messages")
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, dict) and message.get("role") == "user":
                return _text(message.get("content"))[:length]
        return ""
    prompt = data.get("prompt")
    if isinstance(prompt, list):
        prompt = prompt[0] if prompt else ""
    return prompt[:length] if isinstance(prompt, str) else ""


@dataclass
class PrefixIndex:
    """The blocks the gateway sent one replica (see the module's docstring)."""

    capacity: int = DEFAULT_CAPACITY
    current: dict[int, None] = field(default_factory=dict)
    previous: dict[int, None] = field(default_factory=dict)

    def matched(self, print_: Fingerprint) -> int:
        """Characters of the longest leading run of ``print_``'s blocks this replica holds."""
        hashes, low, high = print_.hashes, 0, len(print_.hashes)
        current, previous = self.current, self.previous
        while low < high:  # the first block it does not hold
            middle = (low + high) // 2
            block = hashes[middle]
            if block in current or block in previous:
                low = middle + 1
            else:
                high = middle
        return print_.ends[low - 1] if low else 0

    def sent(self, print_: Fingerprint) -> None:
        self.current.update(dict.fromkeys(print_.hashes))
        if len(self.current) >= self.capacity // 2:
            self.previous, self.current = self.current, {}
