"""The policy on its own: the reference example exactly, and the edges of rounding and clamping."""

from __future__ import annotations

from fractions import Fraction

import pytest

from scheduler.rightsizing.policy import GI, Policy, evaluate, format_memory

MI = 1024**2


def test_reference_example_exactly():
    verdict = evaluate(80 * GI, 75 * GI)
    assert verdict.utilization_percent == 93
    assert verdict.recommended_bytes == 78 * GI
    assert verdict.recommendation == (
        "Consider reducing memory from 80Gi to 78Gi (observed peak 75Gi, 6% overprovisioned)"
    )
    assert verdict.freed_bytes == 2 * GI
    assert not verdict.overprovisioned  # 93 >= 90
    assert verdict.ratio == pytest.approx(0.9375)


def test_utilization_floors_so_the_flag_is_not_hidden():
    verdict = evaluate(100 * GI, int(89.9 * GI))
    assert verdict.utilization_percent == 89
    assert verdict.overprovisioned


def test_peak_above_declared_recommends_an_increase_and_clamps_status():
    verdict = evaluate(16 * GI, 20 * GI)
    assert verdict.utilization_percent == 100
    assert verdict.ratio == pytest.approx(1.25)
    assert verdict.recommended_bytes == 21 * GI  # 20 * 1.04 = 20.8 -> 21
    assert verdict.recommendation == (
        "Consider increasing memory from 16Gi to 21Gi (observed peak 20Gi, 25% above the declared memory)"
    )
    assert verdict.freed_bytes == -5 * GI


def test_tiny_model_below_one_rounding_unit_is_left_alone():
    verdict = evaluate(512 * MI, 100 * MI)
    assert verdict.recommended_bytes == 512 * MI
    assert verdict.recommendation == "No change recommended: 512Mi covers the observed peak 100Mi"
    assert verdict.utilization_percent == 19
    assert verdict.overprovisioned


def test_rounding_is_up_to_the_unit_and_a_finer_unit_gives_a_finer_answer():
    assert evaluate(40 * GI, 30 * GI + 512 * MI).recommended_bytes == 32 * GI  # 31.72Gi -> 32Gi
    fine = evaluate(40 * GI, 30 * GI + 512 * MI, Policy(rounding_unit_bytes=256 * MI))
    assert fine.recommended_bytes == 31 * GI + 768 * MI
    assert fine.recommendation.startswith("Consider reducing memory from 40Gi to 32512Mi")


def test_small_changes_are_not_worth_reporting():
    assert evaluate(80 * GI, 76 * GI).recommended_bytes == 80 * GI  # 79.04 -> 80: nothing to do
    policy = Policy(min_change_bytes=4 * GI)
    verdict = evaluate(80 * GI, 75 * GI, policy)  # 2Gi change < 4Gi
    assert verdict.recommended_bytes == 80 * GI
    assert verdict.recommendation == "No change recommended: 80Gi covers the observed peak 75Gi"


def test_headroom_is_configurable():
    verdict = evaluate(80 * GI, 60 * GI, Policy(headroom_percent=Fraction(20)))
    assert verdict.recommended_bytes == 72 * GI
    assert verdict.recommendation.endswith("(observed peak 60Gi, 25% overprovisioned)")


def test_zero_peak_and_bad_declared():
    assert evaluate(8 * GI, 0).recommended_bytes == 1 * GI
    with pytest.raises(ValueError, match="declared"):
        evaluate(0, GI)


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (75 * GI, "75Gi"),
        (512 * MI, "512Mi"),
        (75 * GI + 1, "75.1Gi"),
        (int(1.25 * GI), "1.3Gi"),
        (30 * GI + 512 * MI, "30.5Gi"),
        (1000, "1000"),
    ],
)
def test_format_memory_never_understates(amount, text):
    assert format_memory(amount) == text
