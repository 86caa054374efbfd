"""The bytes a gateway process holds whole: one budget per process, shared by its requests.

A request body is read whole (its ``model`` is needed before anything is sent) and an answer that
is not a stream is buffered whole (its ``usage`` is read before it is passed on), so each request
may hold up to ``GATEWAY_MAX_BODY_BYTES`` + ``GATEWAY_MAX_RESPONSE_BYTES``. Those caps are per
request: many large answers at once would still take the process's memory without bound (20
answers of 1 GiB took a worker from 164 to 748 MiB). Every such byte is therefore taken from one
:class:`Budget` per process (``GATEWAY_MAX_BYTES_IN_FLIGHT``; with ``--workers N`` the host's
total is N times it) before it is read, and given back when the request ends, however it ends
(:meth:`Hold.release` in a ``finally``). A request whose next bytes do not fit is refused at once
(503 ``gateway_overloaded`` with ``Retry-After``), not queued: a waiting request would keep what it
already holds, and requests all waiting on each other's bytes would make no progress; one refused
gives its bytes back, and the others go on.

The last :data:`RESERVE_SHARE` of the budget is kept for requests holding at most
:data:`SMALL_BYTES` (bodies and answers of ordinary chat requests are a few KiB): large answers
filling the budget refuse each other, never a neighbour's small request.

Streams are not counted: they pass through chunk by chunk with back-pressure, so each holds at most
aiohttp's buffers (the client's read buffer, ``read_bufsize`` of 64 KiB, paused at twice that, and
the server's write buffer, drained above 64 KiB), as every connection holds its own objects.

The event loop is one thread and nothing here awaits, so a take is a check and an add with no
other request in between: no lock is needed.
"""

from __future__ import annotations

SMALL_BYTES = 1024 * 1024  # a request holding at most this much may use the reserve
RESERVE_SHARE = 8  # 1/8 of the budget is kept for small requests


class Budget:
    """The bytes this process's requests hold whole, at most ``limit`` (see the module's docstring)."""

    __slots__ = ("held", "large_limit", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.large_limit = limit - limit // RESERVE_SHARE  # where a request above SMALL_BYTES stops
        self.held = 0

    def hold(self) -> Hold:
        """An empty share for one request."""
        return Hold(self)


class Hold:
    """One request's bytes in a :class:`Budget`; :meth:`release` gives them all back."""

    __slots__ = ("budget", "held")

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.held = 0

    def take(self, count: int) -> bool:
        """Add ``count`` bytes if the budget has room for them (False, and nothing taken, if not)."""
        budget = self.budget
        total = budget.held + count
        if total > (budget.limit if self.held + count <= SMALL_BYTES else budget.large_limit):
            return False
        budget.held = total
        self.held += count
        return True

    def settle(self, reserved: int, used: int) -> bool:
        """``reserved`` bytes were taken before their size was known and ``used`` are held: the rest
        given back, or the difference taken (False if it does not fit; the reservation stays)."""
        if used <= reserved:
            self.held -= reserved - used
            self.budget.held -= reserved - used
            return True
        return self.take(used - reserved)

    def release(self) -> None:
        """Give back everything this request holds (idempotent)."""
        self.budget.held -= self.held
        self.held = 0
