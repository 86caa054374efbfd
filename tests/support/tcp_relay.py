"""A TCP relay that can be cut and restored: a database "stopping" for one client only.

Stopping the shared PostgreSQL server would stop it for every other test run on the machine; a
client pointed at this relay instead sees exactly what a stopped server looks like (connections
reset, new ones refused) while everyone else's keep working. ``cut()`` closes the listening socket
and every relayed connection; ``restore()`` listens again on the same port.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

from devstack.ports import free_port


class TcpRelay:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()
        self.thread = threading.Thread(target=self.loop.run_forever, name="tcp-relay", daemon=True)
        self.thread.start()

    def _call(self, coroutine) -> object:
        future: Future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result(timeout=10)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.target)
        except OSError:
            client_writer.close()
            return
        self.writers |= {client_writer, server_writer}
        await asyncio.gather(self._pipe(client_reader, server_writer), self._pipe(server_reader, client_writer))
        self.writers -= {client_writer, server_writer}

    async def _listen(self) -> None:
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)

    async def _cut(self) -> None:
        self.server.close()
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()
        await self.server.wait_closed()

    def start(self) -> TcpRelay:
        self._call(self._listen())
        return self

    def cut(self) -> None:
        self._call(self._cut())

    def restore(self) -> None:
        self._call(self._listen())

    def close(self) -> None:
        if self.server is not None and self.server.is_serving():
            self.cut()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
