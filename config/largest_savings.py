"""The dashboard's "largest right-sizing savings": the top N chosen by SQL, each row made by the report.

The full report (``scheduler.rightsizing.report.build_report``) turns the newest observation of
every model into a row in Python, then sorts: at 100,000 models that is 100,000 observations with
their model rows, to show 8. Here the database ranks the observations by what the policy would
free and returns N; those N rows are then made by the report's own ``row_for``, so every figure
shown is the policy's exact arithmetic, and SQL only chooses which rows.

What the policy frees (``policy.evaluate``) when it reduces memory: the declared memory minus
``max(unit, ceil(peak x (100 + headroom) / 100 / unit) x unit)``, counted only when at least
``min_change_bytes`` (and above zero). An increase never frees anything, so only reductions rank.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Case, DecimalField, ExpressionWrapper, F, Value, When
from django.db.models.functions import Cast, Ceil, Greatest

from accounts.access import VIEW, restrict
from scheduler.rightsizing.models import Observation
from scheduler.rightsizing.policy import Policy
from scheduler.rightsizing.report import ReportRow, row_for

EXACT = DecimalField(max_digits=65, decimal_places=20)
INT64_MAX = 2**63 - 1


def freed_bytes_expression(policy: Policy) -> Any:
    """SQL for the bytes a reduction frees: declared - recommended (negative or small: no reduction).

    In 64-bit integers (twice as fast as NUMERIC over 100,000 rows), ceil(a / b) as (a + b - 1) / b;
    a peak so large that ``peak x (100 + headroom)`` would overflow them takes the exact NUMERIC path.
    """
    headroom = policy.headroom_percent
    unit = policy.rounding_unit_bytes
    factor = 100 * headroom.denominator + headroom.numerator  # peak x factor / divisor = peak x (1 + headroom)
    divisor = 100 * headroom.denominator * unit
    integer_units = (F("peak_bytes") * Value(factor) + Value(divisor - 1)) / Value(divisor)
    exact_units = Ceil(
        ExpressionWrapper(Cast("peak_bytes", EXACT) * Value(factor) / Value(divisor), output_field=EXACT)
    )
    units = Case(
        When(peak_bytes__lte=(INT64_MAX - divisor) // factor, then=Cast(integer_units, EXACT)),
        default=exact_units,
        output_field=EXACT,
    )
    recommended = Greatest(Value(unit), units * Value(unit), output_field=EXACT)
    return ExpressionWrapper(F("model__memory_bytes") - recommended, output_field=EXACT)


def largest_savings(user: Any, policy: Policy, count: int) -> list[ReportRow]:
    """The ``count`` visible models whose right-sizing frees the most, in the report's order."""
    smallest = max(1, policy.min_change_bytes)
    ranked = (
        restrict(Observation.objects.all(), user, VIEW, prefix="model__")
        .filter(is_latest=True, peak_bytes__isnull=False, model__memory_bytes__gt=0)
        .alias(freed=freed_bytes_expression(policy))
        .filter(freed__gte=smallest)
        .order_by(F("freed").desc(), "-model__cluster__name", "-model__namespace", "-model__name")
        .values_list("pk", flat=True)[:count]
    )
    # Ranking reads ids only: sorting 100,000 whole rows (the model's JSON columns with them) for 8.
    ids = list(ranked)
    observations = Observation.objects.select_related("model__cluster").in_bulk(ids)
    return [row_for(observations[pk], policy) for pk in ids]
