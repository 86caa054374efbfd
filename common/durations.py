"""Go ``time.Duration`` strings (``metav1.Duration``: ``10m``, ``1h30m``, ``1.5h``) as timedeltas."""

from __future__ import annotations

import re
from datetime import timedelta

_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(value: str) -> timedelta | None:
    """The duration, or None when ``value`` is not a non-negative Go duration (the CRD's pattern)."""
    if value == "0":
        return timedelta(0)
    parts = _PART.findall(value or "")
    if not parts or "".join(number + unit for number, unit in parts) != value:
        return None
    return timedelta(seconds=sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts))
