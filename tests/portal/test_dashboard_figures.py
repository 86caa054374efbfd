"""The dashboard's SQL-chosen figures are the ones the full report and the full books give."""

from __future__ import annotations

import pytest

from accounts.access import restrict
from bench.dataset import build
from config.largest_savings import largest_savings
from models_app.models import InferenceModel
from scheduler.rightsizing.conf import default_policy
from scheduler.rightsizing.models import Observation
from scheduler.rightsizing.policy import Policy
from scheduler.rightsizing.report import build_report


@pytest.mark.django_db
@pytest.mark.parametrize(
    "policy",
    [default_policy(), Policy(headroom_percent=default_policy().headroom_percent * 3 / 2, min_change_bytes=0)],
    ids=["default", "fractional-headroom-no-min-change"],
)
def test_largest_savings_are_the_reports_top_rows(policy):
    data = build(clusters=2, models_per_cluster=60, kubeai_models=0, model_services=0, runs=0,
                 observations=240, member_rows=30, analyze=False)  # fmt: skip
    # a peak too large for the 64-bit path (peak x 104 overflows): the exact path ranks it first
    huge = Observation.objects.filter(is_latest=True, model__cluster=data.clusters[0], model__namespace="team-00")[0]
    Observation.objects.filter(pk=huge.pk).update(peak_bytes=2**60)
    InferenceModel.objects.filter(pk=huge.model_id).update(memory_bytes=2**62)
    for user in (data.staff, data.member):
        report = build_report(policy, ordering="-freed_bytes", models=restrict(InferenceModel.objects.all(), user))
        expected = [row for row in report if (row.freed_bytes or 0) > 0][:8]
        assert len(expected) == 8
        assert largest_savings(user, policy, 8) == expected
        assert expected[0].model_id == huge.model_id
