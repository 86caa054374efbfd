"""What right-sizing would free: recommended bytes per model, pluggable.

Right-sizing proper lives in ``scheduler/rightsizing/``. Accounting and
the planner take a ``Recommender`` so that module can plug its own numbers in; without one,
:func:`default_recommended_bytes` is used: the recommendation right-sizing wrote into the
object's status (the reference's wording, "... from 80Gi to 78Gi ..."). There is no second
policy here: a model right-sizing has not judged saves nothing, so the model page, the report,
planning and the dashboard always name the same saving.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from scheduler.holdings import Holding, ModelKey

Recommender = Callable[[Holding], int | None] | Mapping[ModelKey, int]


def default_recommended_bytes(holding: Holding) -> int | None:
    """The recommendation right-sizing wrote into the status; None when it has not judged the model."""
    return holding.status_recommended_bytes or None


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
