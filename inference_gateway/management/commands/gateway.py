"""``manage.py gateway [--host H] [--port N]``: the OpenAI-compatible inference gateway
(docs/gateway.md). One process, one event loop (uvloop); run several behind a Service to use
more cores."""

from __future__ import annotations

import asyncio
import signal

import uvloop
from django.core.management.base import BaseCommand

from config.gc_tuning import tune_collector
from config.tracing import configure_tracing
from inference_gateway.server import run


class Command(BaseCommand):
    help = "Serve the OpenAI API (/v1/models, /v1/chat/completions, /v1/completions, /v1/embeddings) for every model."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1",
                            help="Address to listen on (default 127.0.0.1; a deployment passes --host 0.0.0.0).")
        parser.add_argument("--port", type=int, default=8080, help="Port to listen on (default 8080).")

    def handle(self, *args, host: str, port: int, **options) -> None:
        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, stop.set)
            await run(host, port, stop=stop)

        # Startup objects (Django, the gateway's modules) frozen out of the collector, as the web
        # workers do (config.gc_tuning): full collections walking them took 100-175 ms, every
        # request in flight waiting.
        tune_collector()
        configure_tracing("inference-portal-gateway")  # before the app and its client session are made
        uvloop.run(main())
