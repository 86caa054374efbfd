"""The right-sizing policy: observed peak -> utilization -> recommended memory and its wording.

Pure arithmetic on integers (bytes) and fractions, no floats, so the reference example comes out
exactly and the same inputs always give the same text. The defaults reproduce the InferenceModel
reference's example status (declared 80Gi, observed peak 75Gi):

- ``utilizationPercent`` = floor(100 * peak / declared) = floor(93.75) = **93**. Floor, because
  rounding up would report 94 and, at 89.6%, would hide a model from the below-90 flag.
- recommended = peak * (1 + headroom) rounded **up** to the rounding unit: 75Gi * 1.04 = **78Gi**.
  A 4% headroom over the peak of the window is what turns 75Gi into 78Gi (3% gives 77.25 -> 78Gi
  too, but 5% gives 78.75 -> 79Gi; 4% is the only whole percent for which no rounding is needed
  at all). Rounding up, never down, so the recommendation always covers peak plus headroom.
- overprovisioned = floor(100 * (declared - peak) / declared) = floor(6.25) = **6** percent.
- A change smaller than ``min_change_bytes`` is not worth a restart: no recommendation then.
- A peak above the declared memory gets an increase recommendation (same headroom, same rounding).
- A peak at or below the declared memory never gets a recommendation above it, whatever the
  rounding unit (tiny models whose declared memory is below one rounding unit stay as they are).
- Utilization below ``flag_below_percent`` (90, as the reference's status field says) is flagged
  overprovisioned.

The true ratio (which can exceed 1 when a model uses more than it declared) is kept; only the
status field is clamped to 0..100, as the CRD requires.

An OOM kill in the window (``kube_pod_container_status_last_terminated_reason{reason="OOMKilled"}``)
means the observed peak is where the kernel cut the container off, not what it needed: the
recommendation is then never a reduction but at least the declared memory plus
``oom_increase_percent`` (25%, KRR's and Goldilocks' practice of bumping memory after an OOM),
rounded up like any other recommendation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from clusters.validation.quantities import format_bytes

GI = 1024**3
_UNITS = (("Ti", 1024**4), ("Gi", GI), ("Mi", 1024**2), ("Ki", 1024))


@dataclass(frozen=True)
class Policy:
    """Knobs of the policy; see the module docstring for why each default is what it is."""

    headroom_percent: Fraction = Fraction(4)
    rounding_unit_bytes: int = GI
    min_change_bytes: int = GI
    flag_below_percent: int = 90
    percentile: float | None = None  # None: the maximum over the window; e.g. 0.99 for p99
    min_samples: int = 60  # an hour of one-minute scrapes
    window_seconds: int = 7 * 24 * 3600
    oom_increase_percent: Fraction = Fraction(25)

    def with_overrides(self, **overrides: Any) -> Policy:
        """A copy with the given fields replaced (None values ignored)."""
        return replace(self, **{key: value for key, value in overrides.items() if value is not None})


@dataclass(frozen=True)
class Verdict:
    """What the policy says about one model."""

    declared_bytes: int
    peak_bytes: int
    ratio: float  # true peak/declared, may exceed 1
    utilization_percent: int  # clamped to 0..100 for status
    recommended_bytes: int  # equals declared_bytes when no change is recommended
    recommendation: str
    overprovisioned: bool

    @property
    def freed_bytes(self) -> int:
        """Memory the recommendation gives back (negative when it asks for more)."""
        return self.declared_bytes - self.recommended_bytes

    @property
    def changes(self) -> bool:
        return self.recommended_bytes != self.declared_bytes


def _ceil_div(numerator: Fraction, denominator: int) -> int:
    return -(-numerator.numerator // (numerator.denominator * denominator))


def format_memory(amount: int) -> str:
    """An observed amount for people, as a Kubernetes quantity: the largest binary unit it reaches,
    with one decimal rounded up (``75Gi``, ``30.5Gi``, ``75.1Gi`` for 75Gi + 1 byte), so a peak is
    never understated. Declared and recommended memory use exact ``format_bytes`` instead: they are
    ``spec.memory`` values, whose pattern takes whole numbers only."""
    for suffix, size in _UNITS:
        if amount >= size:
            tenths = _ceil_div(Fraction(amount * 10), size)
            whole, tenth = divmod(tenths, 10)
            return f"{whole}{suffix}" if tenth == 0 else f"{whole}.{tenth}{suffix}"
    return str(amount)


def evaluate(declared_bytes: int, peak_bytes: int, policy: Policy = Policy(), oom_killed: bool = False) -> Verdict:
    """Apply ``policy`` to one model's declared memory and observed peak (both in bytes, > 0 / >= 0)."""
    if declared_bytes <= 0:
        raise ValueError("declared memory must be greater than zero")
    if peak_bytes < 0:
        raise ValueError("observed peak must not be negative")
    ratio = Fraction(peak_bytes, declared_bytes)
    utilization = max(0, min(100, int(ratio * 100)))  # int() floors a non-negative Fraction
    unit = policy.rounding_unit_bytes
    wanted = Fraction(peak_bytes) * (100 + Fraction(policy.headroom_percent)) / 100
    recommended = max(unit, _ceil_div(wanted, unit) * unit)
    if peak_bytes <= declared_bytes:
        recommended = min(recommended, declared_bytes)
    if abs(recommended - declared_bytes) < policy.min_change_bytes:
        recommended = declared_bytes
    if oom_killed:
        bumped = Fraction(declared_bytes) * (100 + policy.oom_increase_percent) / 100
        recommended = max(recommended, _ceil_div(bumped, unit) * unit)
    declared, peak, target = format_bytes(declared_bytes), format_memory(peak_bytes), format_bytes(recommended)
    if oom_killed:
        text = (
            f"Consider increasing memory from {declared} to {target}: OOM-killed in the window "
            f"(observed peak {peak} is where the kill cut it short)"
        )
    elif recommended < declared_bytes:
        over = int(Fraction(declared_bytes - peak_bytes, declared_bytes) * 100)
        text = f"Consider reducing memory from {declared} to {target} (observed peak {peak}, {over}% overprovisioned)"
    elif recommended > declared_bytes:
        # Only reachable with a peak above the declared memory (see the cap above).
        above = _ceil_div(Fraction(peak_bytes - declared_bytes, declared_bytes) * 100, 1)
        text = (
            f"Consider increasing memory from {declared} to {target} "
            f"(observed peak {peak}, {above}% above the declared memory)"
        )
    else:
        text = f"No change recommended: {declared} covers the observed peak {peak}"
    return Verdict(
        declared_bytes=declared_bytes,
        peak_bytes=peak_bytes,
        ratio=float(ratio),
        utilization_percent=utilization,
        recommended_bytes=recommended,
        recommendation=text,
        overprovisioned=utilization < policy.flag_below_percent,
    )
