"""Cross-field rules shared by several kinds (written once, used by each kind's ``extra_rules``)."""

from __future__ import annotations

from typing import Any

from clusters.validation.quantities import quantity_to_decimal
from clusters.validation.schemas import FieldError


def extended_resources_whole(resources: Any, path: str, extended: frozenset[str]) -> list[FieldError]:
    """The API server refuses a pod whose extended resource (a GPU: ``nvidia.com/gpu``, which the
    field ``extended`` names map to) is requested without a limit, or with a limit that differs:
    such a resource cannot be overcommitted. Refuse it up front, naming the field, rather than at
    the Deployment."""
    if not isinstance(resources, dict):
        return []
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    if not isinstance(requests, dict) or not isinstance(limits, dict):
        return []
    errors = []
    for name in sorted(set(requests) & extended):
        if name not in limits:
            errors.append(FieldError(f"{path}.limits.{name}", None,
                                     f"must be set when {path}.requests.{name} is ({requests[name]}): a GPU cannot be "
                                     "overcommitted, so Kubernetes refuses the pod"))  # fmt: skip
        elif quantity_to_decimal(requests[name]) != quantity_to_decimal(limits[name]):
            errors.append(FieldError(f"{path}.limits.{name}", limits[name],
                                     f"must equal {path}.requests.{name} ({requests[name]}): a GPU cannot be "
                                     "overcommitted, so Kubernetes refuses the pod"))  # fmt: skip
    return errors


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
