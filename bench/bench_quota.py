"""Admission with team quotas at scale.

``quota.admit_ms_10000``: one :func:`scheduler.admission.admit.admit` of a new 16Gi, one-GPU model on
PostgreSQL, in a cluster of 10,000 InferenceModels over 50 pools x 20 GPU nodes and 10 team
namespaces, every team with a quota in every pool (guaranteed a tenth of the pool, borrowing up to
another tenth): the pool-row lock, the pool's running models and reservations, the quotas and the
namespace grants, the borrowing and guarantee checks and the reservation written. Median of 15
runs, the reservation released between runs; target under 50 ms.
``quota.admit_ms_10000_without_quotas`` is the same admission once the quotas are deleted, so the
quotas' own cost shows. It leaves out the controller's
Kubernetes calls around it (reading the object, writing the Deployment) and any lock wait.
"""

from __future__ import annotations

import statistics
import time

from accounts.models import NamespaceGrant, Team
from bench.planner_data import GI, NOW, add_models, make_cluster
from scheduler.admission.admit import Demand, admit, release
from scheduler.models import NodePool, TeamQuota

MODELS, TEAMS, RUNS = 10_000, 10, 15


def run() -> dict[str, float]:
    cluster = make_cluster("quota-bench")
    add_models(cluster, MODELS, seed=27, teams=TEAMS)
    teams = [Team.objects.create(name=f"team-{index}") for index in range(TEAMS)]
    NamespaceGrant.objects.bulk_create(
        NamespaceGrant(team=team, cluster=cluster, namespace=team.name) for team in teams
    )
    TeamQuota.objects.bulk_create(
        TeamQuota(team=team, pool=pool, guaranteed_bytes=pool.allocatable_bytes // TEAMS,
                  guaranteed_gpus=pool.gpu_count // TEAMS, borrowing_limit_bytes=pool.allocatable_bytes // TEAMS,
                  borrowing_limit_gpus=pool.gpu_count // TEAMS)
        for pool in NodePool.objects.filter(cluster=cluster)
        for team in teams
    )  # fmt: skip
    demand = Demand(cluster.pk, "pool-0", "InferenceModel", "team-0", "newcomer", 16 * GI, gpus=1)
    with_quotas = _median_admit_ms(demand)
    TeamQuota.objects.all().delete()
    return {
        "quota.admit_ms_10000": with_quotas,
        "quota.admit_ms_10000_without_quotas": _median_admit_ms(demand),  # the same admission, no quota checks
    }


def _median_admit_ms(demand: Demand) -> float:
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        decision = admit(demand, now=NOW)
        samples.append((time.perf_counter() - start) * 1000)
        assert decision.fits, decision.message
        release(demand.cluster_id, demand.kind, demand.namespace, demand.name)
    return round(statistics.median(samples), 2)
