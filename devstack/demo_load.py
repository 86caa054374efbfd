"""Load for the live demo's scaling step (docs/demo.md, "Send load"): ``clients`` conversations, each
sending one chat after another to ``model`` through the gateway for ``seconds``, and every
``SAY_EVERY_SECONDS`` a line of what it sees: requests in flight, answered, and which replicas
answered (the gateway's ``X-Gateway-Replica``).

    .venv/bin/python -m devstack.demo_load --gateway http://127.0.0.1:8001 --token "$TOKEN"

Each client has its own first message, so KubeAI's ``PrefixHash`` places the conversations apart
on the ring once there are several replicas; each answer is ``max_tokens`` long, so a request stays
in flight for seconds and KubeAI's autoscaler, which counts active requests, sees them.
No Django: only ``requests``, so it runs from any checkout's virtual environment.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import requests

MODEL = "default/llama-3.1-8b-instruct-fp8-l4"  # the demo's KubeAI Model with PrefixHash and autoscaling
CLIENTS = 80  # 2.5 times its targetRequests (32): KubeAI's autoscaler wants ceil(80 / 32) = 3 replicas
SECONDS = 60.0
MAX_TOKENS = 1000
SAY_EVERY_SECONDS = 5.0


@dataclass
class Tally:
    """What the clients saw, shared by their threads."""

    in_flight: int = 0
    answered: int = 0
    failed: int = 0
    replicas: Counter = field(default_factory=Counter)
    last_error: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def line(self, elapsed: float) -> str:
        with self.lock:
            replicas = ", ".join(f"{replica} ({count})" for replica, count in sorted(self.replicas.items()))
            failed = f", {self.failed} failed ({self.last_error})" if self.failed else ""
            return (f"{elapsed:4.0f} s: {self.in_flight} in flight, {self.answered} answered{failed}; "
                    f"answered by {replicas or 'none yet'}")


def _client(index: int, url: str, headers: dict[str, str], model: str, max_tokens: int, until: float,
            stop: threading.Event, tally: Tally) -> None:
    body = {"model": model, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": f"Customer {index} asks for a long story about the demo shop."}]}
    while time.monotonic() < until and not stop.is_set():
        with tally.lock:
            tally.in_flight += 1
        try:
            answer = requests.post(url, json=body, headers=headers, timeout=600)
            with tally.lock:
                if answer.status_code == 200:
                    tally.answered += 1
                    tally.replicas[answer.headers.get("X-Gateway-Replica", "?")] += 1
                else:
                    tally.failed += 1
                    tally.last_error = f"{answer.status_code}: {answer.text[:200]}"
        except requests.RequestException as error:
            with tally.lock:
                tally.failed += 1
                tally.last_error = str(error)[:200]
        finally:
            with tally.lock:
                tally.in_flight -= 1


def send_load(gateway: str, token: str, model: str = MODEL, clients: int = CLIENTS, seconds: float = SECONDS,
              max_tokens: int = MAX_TOKENS, say: Callable[[str], None] = print, stop: threading.Event | None = None,
              tally: Tally | None = None) -> Tally:
    """Run the clients until ``seconds`` have passed (or ``stop`` is set) and each has its last
    answer; what they saw (in ``tally`` as they see it, when given)."""
    url, headers = f"{gateway.rstrip('/')}/v1/chat/completions", {"Authorization": f"Bearer {token}"}
    tally, stop, began = tally or Tally(), stop or threading.Event(), time.monotonic()
    threads = [threading.Thread(target=_client, daemon=True, args=(
        index, url, headers, model, max_tokens, began + seconds, stop, tally)) for index in range(clients)]
    for thread in threads:
        thread.start()
    next_line = began + SAY_EVERY_SECONDS
    for thread in threads:
        while thread.is_alive():
            thread.join(timeout=max(0.0, next_line - time.monotonic()))
            if time.monotonic() >= next_line:
                say(tally.line(time.monotonic() - began))
                next_line += SAY_EVERY_SECONDS
    say(tally.line(time.monotonic() - began))
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gateway", default="http://127.0.0.1:8001", help="the gateway the demo's banner names")
    parser.add_argument("--token", required=True, help="the API token in the banner's curl")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--clients", type=int, default=CLIENTS)
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    options = parser.parse_args()
    send_load(options.gateway, options.token, options.model, options.clients, options.seconds, options.max_tokens)


if __name__ == "__main__":
    main()
