"""``manage.py gateway [--host H] [--port N]``: the OpenAI-compatible inference gateway (README
"Inference gateway"). One process, one event loop (uvloop); run several behind a Service to use
more cores."""

from __future__ import annotations

import asyncio
import gc
import signal

import uvloop
from django.core.management.base import BaseCommand

from inference_gateway.server import run


class Command(BaseCommand):
    help = "Serve the OpenAI API (/v1/models, /v1/chat/completions, /v1/completions, /v1/embeddings) for every model."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="0.0.0.0", help="Address to listen on (default 0.0.0.0).")
        parser.add_argument("--port", type=int, default=8080, help="Port to listen on (default 8080).")

    def handle(self, *args, host: str, port: int, **options) -> None:
        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, stop.set)
            await run(host, port, stop=stop)

        freeze_startup_objects()
        uvloop.run(main())


def freeze_startup_objects() -> None:
    """Move every object alive after startup (Django, its apps, the gateway's modules: hundreds of
    thousands) to the collector's permanent generation. They live as long as the process, yet each
    full collection walked all of them: 100-175 ms measured, with the event loop stopped and every
    request in flight waiting. Frozen, a full collection walks only what was allocated since."""
    gc.collect()
    gc.freeze()
