"""``manage.py sim_engine``: the simulated vLLM-like engine (devstack/sim_engine.py) behind the live demo."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from devstack.sim_engine import add_arguments, config_from, serve


class Command(BaseCommand):
    help = ("Serve a simulated inference engine (continuous batching, a KV cache with prefix caching, LoRA slots) "
            "with the OpenAI API and vLLM's /metrics.")

    def add_arguments(self, parser) -> None:
        add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        serve(options["host"], options["port"], options["name"], config_from(options), options["lora"])
