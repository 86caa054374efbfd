"""``manage.py demo_backend``: the small OpenAI-compatible server the live demo's models point at."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from devstack.openai_backend import add_arguments, serve


class Command(BaseCommand):
    help = (
        "Serve a small OpenAI-compatible API (chat, completions, embeddings, streaming, usage) that echoes "
        "its input: the model server behind the live demo's InferenceModels."
    )

    def add_arguments(self, parser) -> None:
        add_arguments(parser)

    def handle(self, *args: Any, host: str, port: int, name: str, chunk_delay: float, think: float, fail: int,
               redirect: str, hostile: str, size: int, **options: Any) -> None:
        serve(host, port, name, chunk_delay, think, fail, redirect, hostile, size)
