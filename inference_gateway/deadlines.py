"""Deadlines of the calls to backends, kept by one sweep instead of a timer per call.

A call to a backend has a total deadline (``GATEWAY_UPSTREAM_TIMEOUT_SECONDS``, from sending the
request to the answer's last byte) that a backend sending a byte now and then cannot extend;
silence is aiohttp's ``sock_read``. ``asyncio.timeout_at`` would do, but each one arms a timer of
the event loop: 15-17 us per use on uvloop on the shared 2-core machine (a request needs two: its
headers, then its body), against 350-450 us for a whole request through the gateway. Here a
deadline is an entry in a set, and one task per process wakes every :data:`SWEEP_SECONDS` to cancel
the calls past theirs: under a microsecond per request, and a deadline is kept to within
:data:`SWEEP_SECONDS`.

A :class:`Deadline` is used as ``with deadline:`` around awaits, like ``asyncio.timeout``: the
expired call's task is cancelled, and the block turns that cancellation (and only that one: a
client leaving cancels the task too) into ``TimeoutError``.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

SWEEP_SECONDS = 0.1


class Deadlines:
    """The deadlines of this process's calls in flight, and the sweep that enforces them."""

    def __init__(self) -> None:
        self.due: set[Deadline] = set()

    def at(self, when: float) -> Deadline:
        """A deadline at ``when`` (the event loop's clock), for one call."""
        return Deadline(self, when)

    async def sweep(self) -> None:
        """Forever: every ``SWEEP_SECONDS``, expire the deadlines that have passed."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            now = loop.time()
            for deadline in [deadline for deadline in self.due if deadline.when <= now]:
                deadline.expire()


class Deadline:
    """One call's deadline; ``with`` it around the awaits it bounds (see the module's docstring)."""

    __slots__ = ("cancelling", "deadlines", "expired", "task", "when")

    def __init__(self, deadlines: Deadlines, when: float) -> None:
        self.deadlines, self.when = deadlines, when
        self.task: asyncio.Task | None = None
        self.cancelling = 0
        self.expired = False

    def __enter__(self) -> Deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a deadline bounds the awaits of a task")
        self.task, self.cancelling = task, task.cancelling()
        if self.when <= asyncio.get_running_loop().time():
            raise TimeoutError
        self.deadlines.due.add(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.deadlines.due.discard(self)
        if self.expired:
            self.expired = False
            # ours the only cancellation asked for since the block began: it ends as a timeout
            if self.task.uncancel() <= self.cancelling and exc_type is asyncio.CancelledError:
                raise TimeoutError from exc

    def expire(self) -> None:
        """Cancel the task awaiting in the block (the sweep found the deadline passed)."""
        self.deadlines.due.discard(self)
        self.expired = True
        self.task.cancel()
