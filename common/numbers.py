"""A measured number as a person reads it: a few significant places and its unit.

Floats from timers and ratios carry every digit they were computed with (a request's latency read
``29.404337999949348`` in the admin, issue 43): a list shows them rounded, with the unit the column
would otherwise leave the reader to guess. Knows no app, so every layer's pages and admin lists
share it.
"""

from __future__ import annotations

from decimal import Decimal


def with_unit(value: float | Decimal | None, unit: str, places: int = 1, empty: str = "—") -> str:
    """``value`` to ``places`` decimals with thousands separators, then ``unit`` (``"29.4 ms"``);
    ``empty`` for no value (a null column)."""
    if value is None:
        return empty
    return f"{value:,.{places}f} {unit}".rstrip()
