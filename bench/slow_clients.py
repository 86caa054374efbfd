"""Slow-header ("slowloris") clients held open against the portal while /healthz is probed.

A client that opens a connection, sends a request line and then one header line every few seconds
never finishes its request. A server that gives each connection a worker (gunicorn's sync worker)
or a thread until the request is complete runs out of them: with as many slow clients as workers
the portal stops answering, its liveness probe included, and the kubelet restarts healthy pods.
"""

from __future__ import annotations

import contextlib
import socket
import time
import urllib.request
from urllib.parse import urlsplit

SLOW_CONNECTIONS = 12
TRICKLE_S = 1.0  # one more header line per slow connection this often
PROBES = 4
PROBE_TIMEOUT_S = 5.0


def _open_slow(host: str, port: int, count: int) -> list[socket.socket]:
    sockets = []
    for number in range(count):
        sock = socket.create_connection((host, port), timeout=5)
        sock.sendall(f"GET /?slow={number} HTTP/1.1\r\nHost: {host}\r\n".encode())
        sockets.append(sock)
    return sockets


def _trickle(sockets: list[socket.socket], line: int) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):  # the server closed it: that is a defence working
            sock.sendall(f"X-Slow-{line}: 1\r\n".encode())


def healthz_answers_under_slow_clients(
    base_url: str, connections: int = SLOW_CONNECTIONS, probes: int = PROBES
) -> bool:
    """Whether every one of ``probes`` GET /healthz answers 200 within ``PROBE_TIMEOUT_S`` while
    ``connections`` slow-header clients are held open (each sends a header line every ``TRICKLE_S``,
    so the server sees them as active, not idle)."""
    parts = urlsplit(base_url)
    sockets = _open_slow(parts.hostname or "127.0.0.1", parts.port or 80, connections)
    try:
        time.sleep(TRICKLE_S)  # let the server accept and start reading every slow connection
        for line in range(probes):
            _trickle(sockets, line)
            try:
                with urllib.request.urlopen(f"{base_url}/healthz", timeout=PROBE_TIMEOUT_S) as response:
                    if response.status != 200:
                        return False
            except OSError:
                return False
            time.sleep(TRICKLE_S)
        return True
    finally:
        for sock in sockets:
            sock.close()
