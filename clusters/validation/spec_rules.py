"""Cross-field rules shared by several kinds (written once, used by each kind's ``extra_rules``)."""

from __future__ import annotations

from typing import Any

from clusters.validation.quantities import quantity_to_decimal
from clusters.validation.schemas import FieldError


def requests_within_limits(resources: Any, path: str) -> list[FieldError]:
    """A request above its limit is refused by the API server at Pod creation; refuse it up front."""
    if not isinstance(resources, dict):
        return []
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    errors = []
    for name, requested in requests.items():
        if name not in limits:
            continue
        low, high = quantity_to_decimal(requested), quantity_to_decimal(limits[name])
        if low is not None and high is not None and low > high:
            errors.append(
                FieldError(
                    f"{path}.requests.{name}", requested, f"must not exceed {path}.limits.{name} ({limits[name]})"
                )
            )
    return errors
