"""The gateway's rules a serving model's write paths check, as the gateway registers them.

Every write path of a servable model (portal form, REST API, apply) checks its ``backendUrl`` and
its gateway id with the rules the gateway routes by (``inference_gateway.placement``: the gateway's
own tables of backend hosts, shared namespaces and shared gateway ids). The gateway reads the serving
models to route, so it sits above ``models_app`` in the apps' layers (docs/architecture.md): it hands
its rules down here from its ``AppConfig.ready()``, as the apps hand their kinds to
``clusters.kinds``, and the models call them through :func:`gateway_rules`, never by import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from clusters.models import Cluster
from clusters.validation.schemas import FieldError


@dataclass(frozen=True)
class GatewayRules:
    """The rules, each as ``inference_gateway.placement`` defines it."""

    backend_url_errors: Callable[[Cluster, str, dict[str, Any]], list[FieldError]]
    """The errors of ``spec.backendUrl`` for a model in (cluster, namespace); [] when it may answer there."""
    gateway_id: Callable[[str, str], str]
    """What clients send as ``model``, from (namespace, model name)."""
    gateway_id_errors: Callable[[Any, Cluster, str, Iterable[type[Any]]], list[FieldError]]
    """The error of a second object claiming a gateway id another one serves, unless staff shared it."""
    backend_port: Callable[[Any], int | None]
    """The port ``spec.backendUrl`` names, read as the gateway connects (None: none written); raises
    ValueError for a URL the gateway cannot read, so the controller never reads one differently."""
    picking_errors: Callable[[dict[str, Any]], list[FieldError]] = field(default=lambda annotations: [])
    """The errors of the annotations that choose how the gateway picks a replica (its strategy and
    scorers' weights: ``inference_gateway.picking.config``); [] when it can use them."""


_registered: list[GatewayRules] = []


def register_gateway_rules(rules: GatewayRules) -> None:
    """Hand down the gateway's rules (``InferenceGatewayConfig.ready()``); a second call replaces them."""
    _registered[:] = [rules]


def gateway_rules() -> GatewayRules:
    """The registered rules; without them no serving model can be checked, so this refuses loudly."""
    if not _registered:
        raise ImproperlyConfigured(
            "no gateway rules registered: inference_gateway must be in INSTALLED_APPS (its ready() registers them)"
        )
    return _registered[0]
