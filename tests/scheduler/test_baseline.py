"""The running models' placement kept between plans (scheduler.planning.baseline): a plan going on from it
answers exactly what placing everything anew answers, whatever changed in between, and a plan
leaves nothing behind in it for the next one. (A reference plan is placed with nothing kept.)"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from clusters.models import Cluster
from scheduler import holdings_cache
from scheduler.models import Node
from scheduler.planning import baseline
from scheduler.planning.placement import Item, NodeSpace, Placement, Placer, PoolSpace, biggest_first, place
from scheduler.planning.planner import plan, plan_to_dict
from scheduler.planning.proposals import Proposal
from tests.scheduler.conftest import GI, NOW, make_model, make_pool, whole

pytestmark = pytest.mark.django_db


def pools() -> list[PoolSpace]:
    return [
        PoolSpace("gpu", 150 * GI, [NodeSpace(f"gpu-{i}", 64 * GI, 2, 16000, 0, "nvidia", "A100") for i in range(3)]),
        PoolSpace("cpu", None, [NodeSpace("cpu-0", 32 * GI), NodeSpace("cpu-1", 16 * GI)]),
    ]


def described(placement: Placement) -> Any:
    """Everything a placement says, as plain values."""
    return (
        [
            (name, result.requested_bytes, result.placed_bytes, [(n.name, n.used_bytes, n.used_gpus, n.used_cpu_millis,
             n.items) for n in result.nodes], [(m.item.label, m.reason, m.detail) for m in result.unplaced])
            for name, result in placement.pools.items()
        ],
        [(m.item.label, m.reason, m.detail) for m in placement.unknown_pool],
        sorted(placement.missed),
    )  # fmt: skip


def test_a_copy_goes_on_as_one_placement_would_and_leaves_its_original_as_it_was():
    fixed = biggest_first(
        [Item(f"run-{i}", "gpu" if i % 3 else "cpu", (i % 7 + 4) * GI, i % 2, 1000) for i in range(40)]
        + [Item("lost", "nowhere", GI)]
    )
    proposals = [Item("big", "gpu", 60 * GI, 2), Item("small", "cpu", GI), Item("amd", "gpu", GI, 1, 0, 0, "amd")]
    placer = Placer(pools())
    placer.add(fixed)
    before = described(placer.placement)
    for _ in range(2):
        copy = placer.copy()
        copy.add(biggest_first(proposals))
        assert described(copy.placement) == described(place(pools(), proposals, fixed))
        assert described(placer.placement) == before
        assert copy.placement.missed == {miss.item.label for miss in copy.placement.misses} != placer.placement.missed


def test_plans_from_the_kept_placement_equal_plans_placed_anew(cluster):
    make_pool(cluster, "gpu", budget="300Gi", nodes=["64Gi", "64Gi", "48Gi"])
    for index, size in enumerate([40, 32, 24, 16, 8, 8]):  # 64Gi nodes left with 0 and 16Gi, the 48Gi one 32Gi
        make_model(cluster, f"run-{index}", f"{size}Gi", last_request=NOW - timedelta(hours=index + 1), cooldown="1m")
    make_model(cluster, "stopped", "8Gi", replicas=0)

    def planned(*proposals: Proposal) -> tuple[dict[str, Any], bool]:
        """The plan from what is kept, equal to the plan placed anew; and whether the kept placement served it."""
        kept = baseline._kept.get(cluster.pk)
        answer = whole(plan_to_dict(plan(Cluster.objects.get(pk=cluster.pk), list(proposals), now=NOW)))
        reused = kept is not None and baseline._kept.get(cluster.pk) is kept
        # the same plan again from the same kept placement: the first left nothing in it
        assert whole(plan_to_dict(plan(Cluster.objects.get(pk=cluster.pk), list(proposals), now=NOW))) == answer
        baseline._kept.clear()
        holdings_cache._kept.clear()
        assert answer == whole(plan_to_dict(plan(Cluster.objects.get(pk=cluster.pk), list(proposals), now=NOW)))
        return answer, reused

    big = Proposal("InferenceModel", cluster.pk, "default", "big", "gpu", 60 * GI, 0, [], "new", "models[0]")
    small = Proposal("InferenceModel", cluster.pk, "default", "small", "gpu", 4 * GI, 0, [], "new", "models[0]")
    answer, _ = planned(big)
    assert not answer["fits"] and pool_of(answer, "gpu")["suggestions"]["fits_after"] == "scale_to_zero"
    answer, reused = planned(small)
    assert answer["fits"] and reused
    assert planned(big) == (planned(big)[0], True)
    Node.objects.filter(pool__cluster=cluster, name="gpu-2").update(allocatable_bytes=96 * GI)
    answer, reused = planned(big)
    assert answer["fits"] and not reused  # the nodes changed: placed anew
    make_model(cluster, "newcomer", "40Gi")
    answer, reused = planned(big)
    assert not reused  # the models changed: placed anew


def pool_of(answer: dict[str, Any], name: str) -> dict[str, Any]:
    return next(pool for pool in answer["pools"] if pool["name"] == name)
