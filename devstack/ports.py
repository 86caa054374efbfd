"""Ports for the processes the tests, benchmarks and the live demo start.

``free_port`` asks the kernel for a port on the wildcard address: a port held on any local
address (a replica listening on the machine's LAN address, an outgoing connection's local port)
conflicts with the wildcard, so it is never offered. Binding ``127.0.0.1`` instead would offer a
port that a process listening on another address already holds, and a readiness probe would then
find that other process answering in place of the one that failed to bind.

A port from ``free_port`` can still be taken by someone else before the started process binds it;
a process that can bind port 0 itself and announce its port (``devstack/openai_backend.py
--port 0``) has no such window.
"""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port that no socket on any local address holds at the moment of asking."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]
