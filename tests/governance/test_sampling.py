"""GPU samples from what models hold (the scheduler's rule): the owner team, idle periods, unused GPUs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from accounts.models import NamespaceGrant, Team
from governance.models import UNASSIGNED, UNUSED, GpuSample
from governance.sampling import sample_holdings
from tests.scheduler.conftest import NOW, make_model, make_pool

pytestmark = pytest.mark.django_db


def test_each_running_model_is_sampled_for_its_owner_team_and_the_rest_of_the_pool_as_unused(cluster) -> None:
    owner = Team.objects.create(name="owners")
    viewer = Team.objects.create(name="callers")
    NamespaceGrant.objects.create(team=owner, cluster=cluster, namespace="team-ns")
    NamespaceGrant.objects.create(team=viewer, cluster=None, namespace="*", access=NamespaceGrant.Access.VIEW)
    pool = make_pool(cluster, "gpu", nodes=["96Gi", "96Gi"], gpus=4)
    pool.gpu_product = "NVIDIA-H100"
    pool.save()
    make_model(cluster, "busy", "10Gi", namespace="team-ns", gpu="2", last_request=NOW - timedelta(minutes=1))
    make_model(cluster, "idle", "10Gi", namespace="team-ns", gpu="1", last_request=NOW - timedelta(hours=2),
               cooldown="24h")
    make_model(cluster, "orphan", "10Gi", namespace="nobodys", gpu="1", last_request=NOW)
    make_model(cluster, "stopped", "10Gi", namespace="team-ns", gpu="4", replicas=0)

    assert sample_holdings(NOW, 300) == 4
    found = {(row.team, row.model): (row.gpus, row.idle, row.gpu_product, row.period_seconds)
             for row in GpuSample.objects.all()}
    assert found == {
        ("owners", "team-ns/busy"): (2, False, "NVIDIA-H100", 300),
        ("owners", "team-ns/idle"): (1, True, "NVIDIA-H100", 300),
        (UNASSIGNED, "nobodys/orphan"): (1, False, "NVIDIA-H100", 300),
        (UNUSED, ""): (4, False, "NVIDIA-H100", 300),  # 8 GPUs, 4 held
    }
    # the next run covers the time since this one (a late run loses no GPU-hour), at most twice the period
    assert sample_holdings(NOW + timedelta(seconds=420), 300) == 4
    assert set(GpuSample.objects.filter(sampled_at=NOW + timedelta(seconds=420)).values_list(
        "period_seconds", flat=True)) == {420}
    sample_holdings(NOW + timedelta(hours=3), 300)
    assert set(GpuSample.objects.filter(sampled_at=NOW + timedelta(hours=3)).values_list(
        "period_seconds", flat=True)) == {600}
