"""An address that accepts connections and never answers: a cluster whose API server hangs (a
stalled load balancer, a node under memory pressure), which a refused port does not show, as the
client then fails at once."""

from __future__ import annotations

import socket
import threading


class SilentServer:
    """Listens on loopback, accepts every connection, reads nothing and answers nothing until
    ``stop()``; ``accepted`` counts the connections made to it."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._held: list[socket.socket] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="silent-server", daemon=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self._socket.getsockname()[1]}"

    @property
    def accepted(self) -> int:
        return len(self._held)

    def start(self) -> SilentServer:
        self._thread.start()
        return self

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                connection, _ = self._socket.accept()
            except OSError:  # closed by stop()
                return
            self._held.append(connection)

    def stop(self) -> None:
        self._stopped.set()
        self._socket.close()
        self._thread.join(timeout=5)
        for connection in self._held:
            connection.close()

    def __enter__(self) -> SilentServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
