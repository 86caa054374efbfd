"""Usage out of an answer on its way to the client, and the usage chunk the client did not ask for.

For a streamed answer the gateway asks the backend for usage (``stream_options.include_usage``,
:func:`with_usage_requested`): the backend then sends one more event, with no choices and the
request's ``usage``, before ``[DONE]``. Clients that asked for it get it; for the others
:class:`UsageTap` takes it out, so they see the stream they asked for. Events are passed on whole
as they complete (an SSE event ends with a blank line); a chunk that ends mid-event keeps its
tail until the rest arrives (up to ``UsageTap.HELD`` bytes), which a backend writing whole events
never makes wait.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

EVENT_END = re.compile(rb"\r?\n\r?\n")
USAGE = b'"usage"'
DONE = b"[DONE]"


def upstream_body(body: bytes, data: dict[str, Any], stream: bool, fields: dict[str, Any]) -> tuple[bytes, bool]:
    """``(body to send, strip)`` for a request ``body`` (``data``, as the gateway parsed it):
    ``fields`` set (:func:`governance.bodies.capped`) and a stream made to ask for usage, with
    whether the client did not ask for it itself (so its usage chunk must be taken out). Only a
    body that changes is encoded again."""
    changes, strip = dict(fields), False
    if stream:
        options = data.get("stream_options")
        if not (isinstance(options, dict) and options.get("include_usage") is True):
            changes["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
            strip = True
    if not changes:
        return body, strip
    return orjson.dumps({**data, **changes}), strip


def usage_of_event(event: bytes) -> tuple[dict[str, Any] | None, bool]:
    """The ``usage`` of one SSE event and whether the event is the usage-only chunk (no choices)."""
    for line in event.splitlines():
        if line.startswith(b"data:"):
            try:
                data = orjson.loads(line[5:].strip())
            except ValueError:
                return None, False
            if isinstance(data, dict) and isinstance(data.get("usage"), dict):
                return data["usage"], not data.get("choices")
    return None, False


def _last_event_end(data: bytes, start: int) -> int:
    """Where the last complete event of ``data`` ends, looking from ``start`` on, or -1."""
    ends = [index + length
            for index, length in ((data.rfind(b"\n\n", start), 2), (data.rfind(b"\n\r\n", start), 3)) if index >= 0]
    return max(ends, default=-1)


class UsageTap:
    """Reads ``usage`` from an SSE stream; drops the usage-only event when ``strip``.

    **Cost and memory, whatever the backend sends.** The usage-only event is small and the last
    before ``[DONE]``, so only the last ``HELD`` bytes of what has arrived are searched, for the
    last event boundary and for ``"usage"`` (in C); only events that contain it are split and
    parsed. What follows the last boundary waits for the next chunk while it is at most ``HELD``
    bytes; longer, it cannot be the usage-only event and is passed on as it comes (but for the
    last ``KEPT`` bytes: a boundary may straddle two chunks). So a 1 GiB stream costs a search of
    ``HELD`` bytes per chunk, and a backend that sends one endless event costs ``HELD`` bytes of
    memory, not its size. What this leaves: a usage event followed in the same chunk by more than
    ``HELD`` bytes of other events is passed on unread, which no engine sends (usage comes last).
    Without ``strip`` every chunk is passed on at once, as it came.

    **Tokens without usage.** It also counts the stream's events (:attr:`streamed`), so that a
    stream that ends without its usage chunk (the client left, or an engine that does not send one)
    is still charged and recorded for what it sent: a ``data:`` line starts each event and cannot
    occur inside one (JSON escapes a newline), so the count is one ``bytes.count`` per chunk, plus
    the few bytes where a line start straddles two chunks.
    """

    HELD = 16 * 1024
    KEPT = 3
    EVENT_START = b"\ndata:"

    def __init__(self, strip: bool) -> None:
        self.strip = strip
        self.usage: dict[str, Any] | None = None
        self._tail = b""
        self.events = 0
        self.done = False  # the stream's ``[DONE]`` event came
        self._last = b"\n"  # the bytes before the next chunk: the stream's start is a line start

    def feed(self, chunk: bytes) -> bytes:
        """What to send now, ``chunk`` included (all of it, at once, without ``strip``)."""
        start = self.EVENT_START
        self.events += chunk.count(start)
        if self._last[-1:] == b"\n" and chunk.startswith(b"data:"):  # whole events (engines write them so)
            self.events += 1  # the event that starts the chunk, its line's start in the last one
            self.done = self.done or DONE in chunk
        else:  # cut anywhere: a line start (or [DONE]) may straddle the two chunks
            joint = self._last + chunk[:len(start) - 1]
            self.events += joint.count(start)
            self.done = self.done or DONE in chunk or DONE in joint
        self._last = chunk[1 - len(start):] if len(chunk) >= len(start) - 1 else (self._last + chunk)[1 - len(start):]
        sent = self._feed(chunk)
        return sent if self.strip else chunk

    @property
    def streamed(self) -> int:
        """The completion tokens the stream carried, counted as engines stream them by default, one
        token an event: its events less ``[DONE]`` and the usage-only one (the role-only first chunk
        vLLM sends counts as one). Read when no usage came."""
        return max(0, self.events - self.done - (self.usage is not None))

    def _feed(self, chunk: bytes) -> bytes:
        data = self._tail + chunk if self._tail else chunk
        window = max(0, len(data) - self.HELD)
        cut = _last_event_end(data, window)
        if cut < 0:
            if len(data) <= self.HELD:
                self._tail = data
                return b""
            self._tail = data[-self.KEPT:]  # part of an event too long to be the usage-only one
            return data[:-self.KEPT]
        self._tail = data[cut:]
        if data.find(USAGE, window, cut) < 0:
            return data[:cut] if cut < len(data) else data
        return self._events(data[:cut])

    def _events(self, complete: bytes) -> bytes:
        """Whole events, less the usage-only one when ``strip``; ``usage`` read where there is one."""
        kept, start = [], 0
        for end in EVENT_END.finditer(complete):
            event = complete[start:end.end()]
            start = end.end()
            usage, usage_only = usage_of_event(event) if USAGE in event else (None, False)
            if usage is not None:
                self.usage = usage
            if not (usage_only and self.strip):
                kept.append(event)
        return b"".join(kept)

    def end(self) -> bytes:
        """Whatever is left when the stream ends (an event without its blank line; nothing
        without ``strip``, where everything was passed on already)."""
        rest, self._tail = self._tail, b""
        if USAGE in rest:
            usage, _ = usage_of_event(rest)
            self.usage = usage or self.usage
        return rest if self.strip else b""
