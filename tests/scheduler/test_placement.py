"""First-fit decreasing on plain objects: placement per node, budgets, fragmentation, largest fit."""

from __future__ import annotations

import random

from scheduler.planning.placement import (
    FRAGMENTED,
    NO_POOL,
    NO_ROOM,
    OVER_BUDGET,
    TOO_BIG,
    Item,
    NodeSpace,
    PoolSpace,
    fits,
    place,
)

GI = 1024**3


def pool(name: str, *sizes: int, budget: int | None = None, gpus: int = 8) -> PoolSpace:
    return PoolSpace(name, budget, [NodeSpace(f"{name}-{i}", size * GI, gpus) for i, size in enumerate(sizes)])


def test_biggest_first_onto_the_first_node_with_room():
    result = place([pool("p", 64, 64)], [Item("a", "p", 20 * GI), Item("b", "p", 50 * GI), Item("c", "p", 30 * GI)])
    nodes = result.pools["p"].nodes
    assert [node.items for node in nodes] == [["b"], ["c", "a"]]
    assert [node.free_bytes for node in nodes] == [14 * GI, 14 * GI]
    assert result.fits and result.pools["p"].largest_fit_bytes == 14 * GI


def test_fragmentation_when_the_pool_has_room_but_no_node_does():
    result = place([pool("p", 40, 40)], [Item("x", "p", 30 * GI), Item("y", "p", 30 * GI), Item("z", "p", 20 * GI)])
    p = result.pools["p"]
    assert [(m.item.label, m.reason) for m in p.unplaced] == [("z", FRAGMENTED)]
    assert p.fragmented and not p.fits
    assert "20.0Gi free in total but the largest free space on one node is 10.0Gi" in p.unplaced[0].detail


def test_budget_caps_the_pool_below_its_nodes_and_largest_fit_respects_it():
    result = place([pool("p", 64, 64, budget=70 * GI)], [Item("a", "p", 40 * GI), Item("b", "p", 40 * GI)])
    p = result.pools["p"]
    assert [(m.item.label, m.reason) for m in p.unplaced] == [("b", OVER_BUDGET)]
    assert p.largest_fit_bytes == 30 * GI  # node has 64Gi free but the budget only 30Gi


def test_gpus_are_a_second_dimension_and_unknown_pools_are_reported():
    result = place(
        [pool("g", 80, 80, gpus=1)],
        [Item("a", "g", 10 * GI, gpus=1), Item("b", "g", 10 * GI, gpus=1), Item("c", "g", 10 * GI, gpus=1),
         Item("d", "nowhere", GI)],
    )  # fmt: skip
    assert [(m.item.label, m.reason) for m in result.pools["g"].unplaced] == [("c", NO_ROOM)]
    assert [(m.item.label, m.reason) for m in result.unknown_pool] == [("d", NO_POOL)]
    assert not result.fits


def test_a_model_bigger_than_every_node_is_not_fragmentation():
    result = place([pool("p", 40, 40)], [Item("huge", "p", 50 * GI)])
    assert [(m.item.label, m.reason) for m in result.pools["p"].unplaced] == [("huge", TOO_BIG)]
    assert not result.pools["p"].fragmented


def test_each_miss_has_its_own_model_and_the_reason_of_the_nodes_as_they_are_then():
    """Reasons are worked out once per pod shape, and again once a pod lands in the pool."""
    fixed = [Item("a", "p", 6 * GI), Item("b", "p", 6 * GI), Item("c", "p", 8 * GI), Item("d", "p", 8 * GI),
             Item("e", "p", 4 * GI)]  # fmt: skip
    result = place([pool("p", 10, 10)], [Item("f", "p", 8 * GI)], fixed)
    misses = [(m.item.label, m.reason) for m in result.pools["p"].unplaced]
    # c and d: 8Gi free in total, 4Gi per node; once e took 4Gi, f finds 4Gi in all
    assert misses == [("c", FRAGMENTED), ("d", FRAGMENTED), ("f", NO_ROOM)]


def test_fits_answers_what_a_whole_placement_answers_for_the_pool():
    """``fits`` stops at the first miss; its answer is the whole placement's for the pool, over
    budgets, fragmentation, GPUs, pods no node could hold and pods of other pools (left out)."""
    draw = random.Random(20261127)
    answers = set()
    for case in range(400):
        budget = draw.choice([None, draw.randint(20, 200) * GI])
        nodes = [(draw.randint(8, 64) * GI, draw.randint(0, 4)) for _ in range(draw.randint(1, 4))]

        def space(budget: int | None = budget, nodes: list[tuple[int, int]] = nodes) -> PoolSpace:
            """A fresh copy each time: nodes are filled in place."""
            return PoolSpace("p", budget, [NodeSpace(f"p-{i}", size, gpus) for i, (size, gpus) in enumerate(nodes)])

        def items(count: int, name: str) -> list[Item]:
            return [Item(f"{name}-{i}", draw.choice(["p", "p", "p", "elsewhere"]), draw.randint(1, 70) * GI,
                         draw.randint(0, 2)) for i in range(count)]  # fmt: skip

        proposed, fixed = items(draw.randint(0, 4), "new"), items(draw.randint(0, 12), "run")
        whole = place([space()], proposed, fixed).pools["p"].fits
        assert fits(space(), proposed, iter(fixed)) == whole, case
        answers.add(whole)
    assert answers == {True, False}
