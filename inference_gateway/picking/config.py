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

The catalog reads these few values with each row's route (:func:`columns`: JSON lookups, never the
whole spec or annotations) and carries the result in the route (``Route.picking``), so a change
arrives with the row's change notice and the request path reads no row of its own; most rows set
none and share one :class:`PickingConfig`. A value the gateway cannot use is logged (once per
distinct value) and the default used; the portal's write paths refuse it first (``models_app``'
rules name the field, the value and the rule).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Expression
from django.db.models.fields.json import KeyTextTransform, KeyTransform

from clusters.validation.schemas import FieldError
from inference_gateway.picking.bounded_hash import PrefixHashSpec
from inference_gateway.picking.scorers import DEFAULT_WEIGHTS, Weights, parse_weights
from models_app.models import KubeAIModel

logger = logging.getLogger(__name__)
PICKER_ANNOTATION = "inference-portal.io/endpoint-picker"
WEIGHTS_ANNOTATION = "inference-portal.io/scorer-weights"
SCORER, LEAST_LOAD, PREFIX_HASH, RANDOM = "scorer", "least-load", "prefix-hash", "random"
ANNOTATED = {"scorer": SCORER, "least-load": LEAST_LOAD, "random": RANDOM}


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


def columns(kind: str) -> dict[str, Expression]:
    """What the catalog reads of a row for its picking, as two annotations (see :func:`from_columns`):
    a KubeAI Model's ``spec.loadBalancing`` and ``spec.adapters``, another kind's two annotations."""
    if kind == KubeAIModel.kube.kind:
        return {"picking_first": KeyTransform("loadBalancing", "spec"),
                "picking_second": KeyTransform("adapters", "spec")}
    return {"picking_first": KeyTextTransform(PICKER_ANNOTATION, "annotations"),
            "picking_second": KeyTextTransform(WEIGHTS_ANNOTATION, "annotations")}


def from_columns(kind: str, first: Any, second: Any, name: str) -> PickingConfig:
    """The :class:`PickingConfig` of the two values :func:`columns` read."""
    if kind == KubeAIModel.kube.kind:
        if not first and not second:
            return KUBEAI_DEFAULT
        return config_of(kind, {"loadBalancing": first, "adapters": second}, {}, name)
    if first is None and second is None:
        return DEFAULT
    annotations = {key: value for key, value in ((PICKER_ANNOTATION, first), (WEIGHTS_ANNOTATION, second))
                   if value is not None}
    if annotation_errors(annotations):
        return config_of(kind, {}, annotations, name)  # the default, logged with the row's name
    return _annotated(kind, tuple(annotations.items()))


@functools.lru_cache(maxsize=1024)
def _annotated(kind: str, annotations: tuple[tuple[str, str], ...]) -> PickingConfig:
    """Valid annotations' config, one per distinct value: thousands of rows may share it."""
    return config_of(kind, {}, dict(annotations))


KUBEAI_DEFAULT = config_of(KubeAIModel.kube.kind, {}, {})
