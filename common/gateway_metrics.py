"""The gateway process's Prometheus registry, and the status it counts for a client that left.

Shared by the gateway's own series (``inference_gateway.metrics``) and the governance hooks that
run inside the gateway process and count in the same registry (``governance.metrics``), so that
neither app imports the other's internals: the gateway sits above governance in the apps' layers
(docs/architecture.md).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

CLIENT_LEFT = 499  # the status counted for a request whose client went away first (nginx's "client closed request")
REGISTRY = CollectorRegistry()
