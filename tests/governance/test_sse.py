"""The stream tap: usage read and its chunk taken out however the backend cuts the stream, in
bounded memory whatever it sends."""

from __future__ import annotations

import json
import random

import pytest

from governance.sse import UsageTap

USAGE = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


def event(data: dict | str, newline: str = "\n") -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    return f"data: {text}{newline}{newline}".encode()


def stream(newline: str) -> tuple[bytes, bytes]:
    """An SSE answer with a usage-only chunk, and the same without it."""
    chunks = [event({"choices": [{"delta": {"content": word}}]}, newline) for word in ("a", "b")]
    usage = event({"choices": [], "usage": USAGE}, newline)
    done = event("[DONE]", newline)
    return b"".join([*chunks, usage, done]), b"".join([*chunks, done])


def feed(tap: UsageTap, data: bytes, cuts: list[int]) -> bytes:
    pieces = [data[start:end] for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    return b"".join(tap.feed(piece) for piece in pieces) + tap.end()


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_usage_is_read_and_its_chunk_taken_out_wherever_the_stream_is_cut(newline) -> None:
    whole, without_usage = stream(newline)
    randomness = random.Random(7)
    for _ in range(300):
        cuts = sorted(randomness.sample(range(1, len(whole)), randomness.randint(0, 12)))
        stripping, passing = UsageTap(strip=True), UsageTap(strip=False)
        assert feed(stripping, whole, cuts) == without_usage, cuts
        assert feed(passing, whole, cuts) == whole, cuts
        assert stripping.usage == passing.usage == USAGE


def test_an_endless_event_is_passed_on_as_it_comes_not_kept() -> None:
    """A hostile backend's event that goes on and on: the tap holds a few KiB, not the event."""
    tap = UsageTap(strip=True)
    chunk, received = b"x" * 65_536, b"data: "
    out = [tap.feed(received)]
    for _ in range(160):  # 10 MiB
        out.append(tap.feed(chunk))
        received += chunk
        assert len(received) - sum(map(len, out)) <= UsageTap.HELD + UsageTap.KEPT
    whole, without_usage = stream("\n")
    out += [tap.feed(b"\n\n" + whole), tap.end()]
    assert b"".join(out) == received + b"\n\n" + without_usage  # whole, less the usage-only chunk
    assert tap.usage == USAGE  # the events after the long one are read as before
