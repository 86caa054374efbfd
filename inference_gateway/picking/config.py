"""How a model's replicas are picked, from its row: the strategy, the scorers' weights, the adapters.

- **KubeAI ``Model``**: ``spec.loadBalancing`` as KubeAI documents it: ``strategy`` ``LeastLoad``
  (KubeAI's default: fewest requests in flight) or ``PrefixHash`` with ``prefixHash``'s
  ``meanLoadFactor`` (125), ``replication`` (256) and ``prefixCharLength`` (100)
  (``picking.bounded_hash``); ``spec.adapters``' names are the LoRA adapters a request may ask for
  as ``<model>_<adapter>``, KubeAI's way.
- **InferenceModel, ModelService**: the scorers (``picking.scorers``), unless the annotation
  ``inference-portal.io/endpoint-picker`` says ``least-load`` or ``random`` (a baseline, for
  benchmarks). ``inference-portal.io/scorer-weights`` (``prefix=3,queue=2,kv=2,lora=1``, any of
  them) sets the weights of one model.

Rows are read in the gateway's database thread, at most once per ``ttl`` per model, and never on a
request's path once read (the first request of a model waits for the first read, as for its
replicas). A value the gateway cannot use is logged and the default used; the portal's write paths
refuse it first (``models_app``' rules name the field, the value and the rule).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from clusters.validation.schemas import FieldError
from common.db_thread import read
from inference_gateway.picking.bounded_hash import PrefixHashSpec
from inference_gateway.picking.scorers import DEFAULT_WEIGHTS, Weights, parse_weights
from inference_gateway.routes import Route
from models_app.models import InferenceModel, KubeAIModel, ModelService

logger = logging.getLogger(__name__)
PICKER_ANNOTATION = "inference-portal.io/endpoint-picker"
WEIGHTS_ANNOTATION = "inference-portal.io/scorer-weights"
SCORER, LEAST_LOAD, PREFIX_HASH, RANDOM = "scorer", "least-load", "prefix-hash", "random"
ANNOTATED = {"scorer": SCORER, "least-load": LEAST_LOAD, "random": RANDOM}
KINDS = {model.kube.kind: model for model in (InferenceModel, KubeAIModel, ModelService)}


@dataclass(frozen=True)
class PickingConfig:
    strategy: str = SCORER
    weights: Weights = DEFAULT_WEIGHTS
    prefix_hash: PrefixHashSpec = field(default_factory=PrefixHashSpec)
    adapters: frozenset[str] = frozenset()

    def serves(self, kind: str, adapter: str) -> bool:
        """Whether a request may ask this model for ``adapter``: a KubeAI Model only for the adapters
        its spec lists (KubeAI's proxy answers 404 for others); another kind for any, as its engines
        decide (vLLM answers 404 for one it does not hold)."""
        return adapter in self.adapters if kind == KubeAIModel.kube.kind else True


DEFAULT = PickingConfig()


def config_of(kind: str, spec: dict[str, Any], annotations: dict[str, Any], name: str = "") -> PickingConfig:
    """The picking of one row's spec and annotations (see the module's docstring)."""
    if kind == KubeAIModel.kube.kind:
        balancing = spec.get("loadBalancing") or {}
        prefix = balancing.get("prefixHash") or {}
        defaults = PrefixHashSpec()
        return PickingConfig(
            strategy=PREFIX_HASH if balancing.get("strategy") == "PrefixHash" else LEAST_LOAD,
            prefix_hash=PrefixHashSpec(
                int(prefix.get("meanLoadFactor") or defaults.mean_load_factor),
                int(prefix.get("replication") or defaults.replication),
                int(prefix.get("prefixCharLength") or defaults.prefix_char_length),
            ),
            adapters=frozenset(str(item.get("name")) for item in spec.get("adapters") or [] if isinstance(item, dict)),
        )
    strategy = ANNOTATED.get(str(annotations.get(PICKER_ANNOTATION) or "scorer"))
    if strategy is None:
        logger.warning("%s: annotation %s=%r is not one of %s; using the scorers", name, PICKER_ANNOTATION,
                       annotations.get(PICKER_ANNOTATION), ", ".join(ANNOTATED))
        strategy = SCORER
    weights = DEFAULT_WEIGHTS
    if annotations.get(WEIGHTS_ANNOTATION):
        try:
            weights = parse_weights(str(annotations[WEIGHTS_ANNOTATION]))
        except ValueError as error:
            logger.warning("%s: annotation %s: %s; using the default weights", name, WEIGHTS_ANNOTATION, error)
    return PickingConfig(strategy=strategy, weights=weights)


def annotation_errors(annotations: dict[str, Any]) -> list[FieldError]:
    """The write paths' rule for the two annotations (``models_app.gateway_rules``): field, value, rule."""
    errors = []
    picker = annotations.get(PICKER_ANNOTATION)
    if picker is not None and picker not in ANNOTATED:
        errors.append(FieldError(f"metadata.annotations[{PICKER_ANNOTATION}]", picker,
                                 f"must be one of {', '.join(ANNOTATED)}"))
    weights = annotations.get(WEIGHTS_ANNOTATION)
    if weights is not None:
        try:
            parse_weights(str(weights))
        except ValueError as error:
            errors.append(FieldError(f"metadata.annotations[{WEIGHTS_ANNOTATION}]", weights, str(error)))
    return errors


def _load(route: Route) -> PickingConfig:
    model = KINDS.get(route.kind)
    row = model.objects.filter(pk=route.pk).values("spec", "annotations").first() if model else None
    if row is None:
        return DEFAULT
    return config_of(route.kind, row["spec"] or {}, row["annotations"] or {}, route.id)


class Configs:
    """Each route's :class:`PickingConfig`, re-read in the background at most once per ``ttl``."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.known: dict[tuple, tuple[float, PickingConfig]] = {}
        self.loading: dict[tuple, asyncio.Task] = {}

    async def get(self, route: Route) -> PickingConfig:
        known = self.known.get(route.key)
        if known is None:
            return await self._load(route)
        if time.monotonic() - known[0] > self.ttl and route.key not in self.loading:
            self.loading[route.key] = asyncio.ensure_future(self._load(route))
        return known[1]

    async def _load(self, route: Route) -> PickingConfig:
        try:
            config = await read(lambda: _load(route))
        except Exception as error:  # the database is away: the last known, else the default
            logger.warning("picking settings of %s: %s", route.id, error)
            config = self.known.get(route.key, (0.0, DEFAULT))[1]
        finally:
            self.loading.pop(route.key, None)
        self.known[route.key] = (time.monotonic(), config)
        return config
