"""The gateway as ``manage.py gateway --workers 1`` serves, for ``python -m bench routing``, with its
replicas listed by the benchmark (``BENCH_ROUTING_REPLICAS``: base URLs, comma-separated) instead
of a cluster's EndpointSlices: the benchmark runs no control plane, and every model it routes
answers on those replicas. Everything else is the gateway's own code (``inference_gateway.server``)."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")

import django

django.setup()

from aiohttp import web  # noqa: E402
from django.conf import settings  # noqa: E402

from inference_gateway.routes import Route  # noqa: E402
from inference_gateway.server import GATEWAY, make_app  # noqa: E402

REPLICAS = [url for url in os.environ.get("BENCH_ROUTING_REPLICAS", "").split(",") if url]


def listed(route: Route) -> list[str]:
    """The benchmark's replicas, under the route's path prefix (KubeAI's ``/openai``)."""
    return [f"{url}{route.prefix}" for url in REPLICAS]


def main(port: int) -> None:
    app = make_app()
    app[GATEWAY].balancer.discoverer = listed
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, handler_cancellation=True,
                keepalive_timeout=float(settings.GATEWAY_CLIENT_TIMEOUT_SECONDS))


if __name__ == "__main__":
    main(int(sys.argv[1]))
