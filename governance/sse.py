"""Usage out of an answer on its way to the client, and the usage chunk the client did not ask for.

For a streamed answer the gateway asks the backend for usage (``stream_options.include_usage``,
:func:`with_usage_requested`): the backend then sends one more event, with no choices and the
request's ``usage``, before ``[DONE]``. Clients that asked for it get it; for the others
:class:`UsageTap` takes it out, so they see the stream they asked for. Events are passed on whole
as they complete (an SSE event ends with a blank line); a chunk that ends mid-event keeps its
tail until the rest arrives, which a backend writing whole events never makes wait.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

EVENT_END = re.compile(rb"\r?\n\r?\n")
USAGE = b'"usage"'


def with_usage_requested(body: bytes, data: dict[str, Any]) -> tuple[bytes, bool, bool]:
    """``(body to send, streamed, strip)`` for a request ``body`` (``data``, as the gateway parsed
    it): a streamed request made to ask for usage, and whether the client did not ask for it itself
    (so its usage chunk must be taken out). Only such a body is encoded again."""
    if data.get("stream") is not True:
        return body, False, False
    options = data.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        return body, True, False
    data = {**data, "stream_options": {**(options if isinstance(options, dict) else {}), "include_usage": True}}
    return orjson.dumps(data), True, True


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


class UsageTap:
    """Reads ``usage`` from an SSE stream; drops the usage-only event when ``strip``."""

    def __init__(self, strip: bool) -> None:
        self.strip = strip
        self.usage: dict[str, Any] | None = None
        self._tail = b""

    def feed(self, chunk: bytes) -> bytes:
        """What of ``chunk`` to send now."""
        data = self._tail + chunk if self._tail else chunk
        ends = list(EVENT_END.finditer(data))
        if not ends:
            self._tail = data
            return b""
        cut = ends[-1].end()
        self._tail = data[cut:]
        complete = data[:cut]
        if USAGE not in complete:
            return complete
        kept, start = [], 0
        for end in ends:
            event = complete[start:end.end()]
            start = end.end()
            usage, usage_only = usage_of_event(event) if USAGE in event else (None, False)
            if usage is not None:
                self.usage = usage
            if not (usage_only and self.strip):
                kept.append(event)
        return b"".join(kept)

    def end(self) -> bytes:
        """Whatever is left when the stream ends (an event without its blank line)."""
        rest, self._tail = self._tail, b""
        return rest
