"""Kubernetes quantities as numbers, through the official client's parser (never by hand)."""

from __future__ import annotations

import functools
from decimal import Decimal, InvalidOperation

from kubernetes.utils import parse_quantity

from clusters.validation.limits import INT64_MAX

_BINARY_UNITS = (("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024))


def saturate_int64(amount: int) -> int:
    """``amount`` capped to int64, as Kubernetes caps every quantity ("no quantity may represent a
    number greater than 2^63-1"); the portal's columns for quantities and their totals are int64."""
    return max(-INT64_MAX - 1, min(amount, INT64_MAX))


def quantity_to_int(value: object) -> int | None:
    """Parse ``"80Gi"``, ``"4000m"`` or ``2`` to an integer (rounded up, capped to int64), None when
    absent or invalid.

    Projections use this on already-validated specs; None means the field was not given.
    """
    number = quantity_to_decimal(value)
    return None if number is None else saturate_int64(int(number.to_integral_value(rounding="ROUND_CEILING")))


def quantity_to_decimal(value: object) -> Decimal | None:
    """Like :func:`quantity_to_int` but exact, for CPU cores and comparisons."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return _parsed(value)
    try:
        return parse_quantity(value)
    except (ValueError, TypeError, InvalidOperation):
        return None


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> Decimal | None:
    """The client's parser (about 1 us a quantity) is asked the same few strings ("48Gi", "8") for
    every object a resync stores and every model planning reads: each is parsed once. Decimals
    are immutable, so sharing one is safe."""
    try:
        return parse_quantity(text)
    except (ValueError, TypeError, InvalidOperation):
        return None


def format_bytes(amount: int) -> str:
    """The largest binary unit that expresses ``amount`` exactly: 85899345920 -> ``80Gi``."""
    for suffix, size in _BINARY_UNITS:
        if amount and amount % size == 0:
            return f"{amount // size}{suffix}"
    return str(amount)
