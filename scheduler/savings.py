"""What right-sizing would free: recommended bytes per model, pluggable.

Right-sizing proper lives in ``scheduler/rightsizing/`` (someone else's module). Accounting and
the planner take a ``Recommender`` so that module can plug its own numbers in; without one,
:func:`default_recommended_bytes` is used: the recommendation the cluster's status carries
(the reference's wording, "... from 80Gi to 78Gi ..."), else the fallback policy observed peak
x 1.04 rounded up to a whole Gi, which reproduces the reference example (peak 75Gi -> 78Gi).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from scheduler.holdings import Holding, ModelKey

GI = 1024**3
FALLBACK_HEADROOM = 1.04

Recommender = Callable[[Holding], int | None] | Mapping[ModelKey, int]


def fallback_recommended_bytes(peak_bytes: int) -> int:
    """peak x 1.04, rounded up to a whole Gi (75Gi -> 78Gi)."""
    return math.ceil(peak_bytes * FALLBACK_HEADROOM / GI) * GI


def default_recommended_bytes(holding: Holding) -> int | None:
    return recommended_from(holding.status_recommended_bytes, holding.observed_peak_bytes)


def recommended_from(status_recommended: int | None, observed_peak: int | None) -> int | None:
    """The cluster's own recommendation, else the fallback policy on the observed peak."""
    if status_recommended:
        return status_recommended
    if observed_peak:
        return fallback_recommended_bytes(observed_peak)
    return None


def recommended_bytes(holding: Holding, recommender: Recommender | None = None) -> int | None:
    """The recommended memory of ``holding``, or None when nothing is known."""
    if recommender is None:
        return default_recommended_bytes(holding)
    if isinstance(recommender, Mapping):
        return recommender.get(holding.key)
    return recommender(holding)


def saving_bytes(holding: Holding, recommender: Recommender | None = None) -> int:
    """Declared minus recommended when positive: right-sizing never adds memory here."""
    recommended = recommended_bytes(holding, recommender)
    return max(0, holding.memory_bytes - recommended) if recommended is not None else 0
