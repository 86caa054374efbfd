"""``manage.py gateway [--host H] [--port N] [--workers W]``: the OpenAI-compatible inference gateway
(docs/gateway.md). One worker is one process, one event loop (uvloop); with several (the default:
``GATEWAY_WORKERS``, else one per core) a supervisor runs them on the same port
(inference_gateway/workers.py), each a fork of this process."""

from __future__ import annotations

import asyncio
import functools
import signal
import sys

import uvloop
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from common.gc_tuning import tune_collector
from common.tracing import configure_tracing
from inference_gateway.server import run
from inference_gateway.workers import default_workers, supervise


class Command(BaseCommand):
    help = "Serve the OpenAI API (/v1/models, /v1/chat/completions, /v1/completions, /v1/embeddings) for every model."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--host",
            default="127.0.0.1",
            help="Address to listen on (default 127.0.0.1; a deployment passes --host 0.0.0.0).",
        )
        parser.add_argument("--port", type=int, default=settings.GATEWAY_PORT,
                            help="Port to listen on (default GATEWAY_PORT, 8001 unless set).")
        parser.add_argument(
            "--workers",
            type=int,
            default=None,
            help="Gateway processes on the port (default GATEWAY_WORKERS, else one per core); "
            "1 serves in this process.",
        )
        parser.add_argument(
            "--reuse-port",
            action="store_true",
            help="Listen with SO_REUSEPORT beside other processes (the supervisor sets it).",
        )

    def handle(self, *args, host: str, port: int, workers: int | None, reuse_port: bool, **options) -> None:
        count = default_workers() if workers is None else workers
        if count < 1:
            raise CommandError(f"--workers: {count} is not a number of processes (1 or more)")
        if count > 1:
            sys.exit(supervise(count, functools.partial(serve, host, port, reuse_port=True)))
        serve(host, port, reuse_port)


def serve(host: str, port: int, reuse_port: bool) -> int:
    """One gateway process's life, until SIGINT or SIGTERM: this process, or a worker forked from
    the supervisor (inference_gateway/workers.py); its exit status."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await run(host, port, stop=stop, reuse_port=reuse_port)

    # Startup objects (Django, the gateway's modules) frozen out of the collector, as the web
    # workers do (common.gc_tuning): full collections walking them took 100-175 ms, every
    # request in flight waiting.
    tune_collector()
    configure_tracing("inference-portal-gateway")  # before the app and its client session are made
    uvloop.run(main())
    return 0
