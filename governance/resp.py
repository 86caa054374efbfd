"""One pipelined connection to Redis for the gateway's limits: every request's command on one socket.

redis-py's asyncio client takes a connection from its pool per command and spends about 300 us
of CPU on each (measured under load: the gateway's CPU per request doubled with limits on). The
gateway asks one short script per request, so this client keeps one connection and sends the
commands of one event-loop turn in one write, without waiting for earlier answers: Redis answers
in order, and each answer resolves the oldest waiting future (the "auto-pipelining" of ioredis
and Lettuce). Commands
are encoded and answers parsed by hiredis (C). A connection that fails, or an answer that takes
more than ``timeout`` seconds, fails every command waiting on it; the next command reconnects (a
timeout that only this process's stalled event loop made late is given once more, :func:`_expire`).

**A Redis that hangs costs one timeout, not one per request.** A failure (refused, reset, or no
answer within ``timeout``: 0.25 s by default, ``GOVERNANCE_REDIS_TIMEOUT_SECONDS``) opens a circuit
for ``retry_seconds``: every command meanwhile fails at once, without touching the network; the
first command after it tries Redis again (and opens the circuit again if that fails too). What the
callers do with the failure is theirs: the gateway lets the request through unchecked and counts it
(docs/usage.md).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import time
from collections import deque
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

import hiredis


@functools.lru_cache(maxsize=16)
def _sha1(script: str) -> str:
    """The name Redis knows a script by (worked out once per script, not per request)."""
    return hashlib.sha1(script.encode()).hexdigest()


class RedisUnavailable(OSError):
    """The connection failed or an answer did not come in time."""


class CircuitOpen(RedisUnavailable):
    """Not asked: Redis failed less than ``retry_seconds`` ago (the failure was reported then)."""


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.reader = hiredis.Reader()
        self.waiting: deque[asyncio.Future] = deque()
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.outgoing: list[bytes] = []

    def send(self, command: bytes) -> None:
        """Queue ``command``; every command queued in this turn of the loop leaves in one write."""
        if not self.outgoing:
            asyncio.get_running_loop().call_soon(self._write)
        self.outgoing.append(command)

    def _write(self) -> None:
        data, self.outgoing = b"".join(self.outgoing), []
        if not self.lost:
            self.transport.write(data)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            future = self.waiting.popleft()
            if not future.done():
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.fail(RedisUnavailable(f"connection to Redis lost: {exc or 'closed'}"))

    def fail(self, error: Exception) -> None:
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(error)


class _NoAnswer(Exception):
    """No answer came within the timeout (:func:`_expire`)."""


def _expire(future: asyncio.Future, deadline: float, timeout: float, again: bool) -> None:
    """The timeout of one command. A timer that fires late by more than half the timeout means this
    process's event loop itself was stalled (CPU contention, a long callback), not that Redis was
    slow: the answer may be in the socket, unread, and the loop's timers run before it reads
    sockets (uvloop's do in every turn). So the command gets the timeout once more from now; only
    a timer on time, or the second one, fails it. Without this a busy gateway let requests through
    its limits unchecked (and then every request for ``retry_seconds``) exactly when it was busiest."""
    if future.done():
        return
    loop = future.get_loop()
    if again and loop.time() - deadline > timeout / 2:
        loop.call_later(timeout, _expire, future, loop.time() + timeout, timeout, False)
        return
    future.set_exception(_NoAnswer())


class PipelinedRedis:
    """``await call("GET", key)``; ``await evalsha(script, keys, args)`` loads the script when Redis lacks it."""

    def __init__(self, url: str, timeout: float = 0.25, retry_seconds: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, on_open: Callable[[], None] | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss"):
            raise ValueError(f"GOVERNANCE_REDIS_URL: {url!r} is not a redis:// or rediss:// URL")
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 6379
        self.tls = parts.scheme == "rediss"
        self.username = unquote(parts.username) if parts.username else None
        self.password = unquote(parts.password) if parts.password else None
        self.db = int(parts.path.lstrip("/") or 0)
        self.timeout = timeout
        self.retry_seconds, self.clock, self.on_open = retry_seconds, clock, on_open
        self.open_until = 0.0  # the circuit: commands fail at once until then (clock's time)
        self.last_failure = ""
        self._protocol: _Protocol | None = None
        self._connecting: asyncio.Future | None = None

    async def _connection(self) -> _Protocol:
        if self._protocol is not None and not self._protocol.lost:
            return self._protocol
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect())
            self._connecting.add_done_callback(lambda _: setattr(self, "_connecting", None))
        return await asyncio.shield(self._connecting)

    async def _connect(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await asyncio.wait_for(
                loop.create_connection(_Protocol, self.host, self.port, ssl=self.tls or None), self.timeout)
        except (OSError, TimeoutError) as error:
            raise RedisUnavailable(f"cannot connect to Redis at {self.host}:{self.port}: {error}") from None
        setup = []
        if self.password:
            setup.append(("AUTH", *([self.username] if self.username else []), self.password))
        if self.db:
            setup.append(("SELECT", self.db))
        for command in setup:
            reply = await self._send(protocol, command)
            if isinstance(reply, hiredis.ReplyError):
                protocol.transport.close()
                raise RedisUnavailable(f"Redis refused {command[0]}: {reply}")
        self._protocol = protocol
        return protocol

    async def _send(self, protocol: _Protocol, command: tuple[Any, ...]) -> Any:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        protocol.waiting.append(future)
        protocol.send(hiredis.pack_command(command))
        timer = loop.call_later(self.timeout, _expire, future, loop.time() + self.timeout, self.timeout, True)
        try:
            return await future
        except _NoAnswer:
            protocol.lost = True  # never used again, even before the loop reports the connection lost
            protocol.transport.abort()  # the answers that follow would be matched to the wrong commands
            raise RedisUnavailable(f"Redis did not answer within {self.timeout} s") from None
        finally:
            timer.cancel()

    async def call(self, *command: Any) -> Any:
        """One command's reply; an error reply is returned as ``hiredis.ReplyError``. Fails at once
        (:class:`RedisUnavailable`) while the circuit is open."""
        if self.open_until:
            left = self.open_until - self.clock()
            if left > 0:
                raise CircuitOpen(f"Redis not asked for {left:.2f} s more after a failure: {self.last_failure}")
            self.open_until = 0.0  # half open: this command tries Redis again
        try:
            return await self._send(await self._connection(), command)
        except RedisUnavailable as error:
            self._open(str(error))
            raise

    def _open(self, failure: str) -> None:
        if not self.open_until:
            self.last_failure = failure
            self.open_until = self.clock() + self.retry_seconds
            if self.on_open is not None:
                self.on_open()

    async def evalsha(self, script: str, keys: list[str], args: list[Any]) -> Any:
        sha = _sha1(script)
        reply = await self.call("EVALSHA", sha, len(keys), *keys, *args)
        if isinstance(reply, hiredis.ReplyError) and str(reply).startswith("NOSCRIPT"):
            reply = await self.call("EVAL", script, len(keys), *keys, *args)
        if isinstance(reply, hiredis.ReplyError):
            raise RedisUnavailable(f"Redis refused the limits script: {reply}")
        return reply

    async def close(self) -> None:
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()
        self._protocol = None
