"""Ports for the processes the tests, benchmarks and the live demo start, and the wait until one serves.

``free_port`` asks the kernel for a port on the wildcard address: a port held on any local
address (a replica listening on the machine's LAN address, an outgoing connection's local port)
conflicts with the wildcard, so it is never offered. Binding ``127.0.0.1`` instead would offer a
port that a process listening on another address already holds, and a readiness probe would then
find that other process answering in place of the one that failed to bind.

A port from ``free_port`` can still be taken by someone else before the started process binds it;
a process that can bind port 0 itself and announce its port (``devstack/openai_backend.py
--port 0``) has no such window. :func:`wait_serving` fails at once when the started process has
exited (a port it could not bind, say), so no other server on that port passes for it.
"""

from __future__ import annotations

import socket
import subprocess
import time

import requests


def free_port() -> int:
    """A TCP port that no socket on any local address holds at the moment of asking."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def wait_serving(url: str, what: str, process: subprocess.Popen | None = None, timeout: float = 120.0) -> None:
    """Wait until ``url`` answers (any status): seconds on a quiet machine, tens on a busy one; the
    limit only bounds a process that never comes up. A ``process`` that exits first fails at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before serving {url}")
        try:
            requests.get(url, timeout=1)
            return
        except requests.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not start serving {url} within {timeout:g} s")
