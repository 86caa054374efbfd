"""The three-way merge, example by example and as properties over random JSON documents."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from clusters.sync.merge import ABSENT, MergeConflict, three_way_merge

BASE = {"memory": "80Gi", "nodeSelector": {"inference-pool": "a100"}, "dependencies": ["tok"], "maxReplicas": 1}


def edit(document: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = {**document, **changes}
    return {key: value for key, value in out.items() if value is not ABSENT}


def test_disjoint_changes_are_both_kept() -> None:
    result = three_way_merge(BASE, edit(BASE, memory="64Gi"), edit(BASE, maxReplicas=0))
    assert result.conflicts == []
    assert result.merged == edit(BASE, memory="64Gi", maxReplicas=0)


def test_nested_maps_merge_key_by_key() -> None:
    portal = edit(BASE, nodeSelector={"inference-pool": "a100", "gpu": "x"})
    cluster = edit(BASE, nodeSelector={"inference-pool": "a100", "zone": "z1"})
    assert three_way_merge(BASE, portal, cluster).merged["nodeSelector"] == {
        "inference-pool": "a100",
        "gpu": "x",
        "zone": "z1",
    }


def test_same_field_changed_differently_conflicts_and_keeps_the_portal_value() -> None:
    result = three_way_merge(BASE, edit(BASE, memory="64Gi"), edit(BASE, memory="96Gi"))
    assert result.conflicts == [MergeConflict("memory", "80Gi", "64Gi", "96Gi")]
    assert result.merged["memory"] == "64Gi"


def test_same_change_on_both_sides_is_no_conflict() -> None:
    result = three_way_merge(BASE, edit(BASE, memory="64Gi"), edit(BASE, memory="64Gi"))
    assert result.conflicts == [] and result.merged["memory"] == "64Gi"


def test_lists_are_whole_values() -> None:
    result = three_way_merge(BASE, edit(BASE, dependencies=["tok", "a"]), edit(BASE, dependencies=["tok", "b"]))
    assert [conflict.path for conflict in result.conflicts] == ["dependencies"]


def test_delete_versus_edit_conflicts() -> None:
    result = three_way_merge(BASE, edit(BASE, maxReplicas=ABSENT), edit(BASE, maxReplicas=0))
    assert result.conflicts == [MergeConflict("maxReplicas", 1, ABSENT, 0)]
    assert result.conflicts[0].as_dict() == {
        "path": "maxReplicas",
        "base": 1,
        "base_set": True,
        "portal": None,
        "portal_set": False,
        "cluster": 0,
        "cluster_set": True,
    }


def test_delete_on_one_side_only_is_applied() -> None:
    assert "maxReplicas" not in three_way_merge(BASE, edit(BASE, maxReplicas=ABSENT), BASE).merged
    assert "maxReplicas" not in three_way_merge(BASE, edit(BASE, memory="1Gi"), edit(BASE, maxReplicas=ABSENT)).merged


def test_no_base_means_every_difference_conflicts() -> None:
    result = three_way_merge(None, {"a": 1, "b": 2}, {"a": 1, "b": 3, "c": 4})
    assert result.merged == {"a": 1, "b": 2, "c": 4}
    assert [conflict.path for conflict in result.conflicts] == ["b"]


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["a", "b", "80Gi"]))
json_value = st.recursive(
    json_leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=2), st.dictionaries(st.sampled_from(["x", "y", "z"]), children, max_size=3)
    ),
    max_leaves=8,
)
documents = st.dictionaries(st.sampled_from(["memory", "pool", "deps", "nested"]), json_value, max_size=4)


@given(documents, documents)
def test_one_sided_changes_always_win(base: dict, changed: dict) -> None:
    assert three_way_merge(base, changed, base).merged == changed
    assert three_way_merge(base, base, changed).merged == changed
    assert three_way_merge(base, changed, changed).conflicts == []


@given(documents, documents, documents)
def test_merge_is_symmetric_in_its_conflicts(base: dict, portal: dict, cluster: dict) -> None:
    forward, backward = three_way_merge(base, portal, cluster), three_way_merge(base, cluster, portal)
    assert {c.path for c in forward.conflicts} == {c.path for c in backward.conflicts}
    if not forward.conflicts:
        assert forward.merged == backward.merged


@given(documents, documents, documents)
def test_a_clean_merge_keeps_every_change_of_both_sides(base: dict, portal: dict, cluster: dict) -> None:
    result = three_way_merge(base, portal, cluster)
    if result.conflicts:
        for conflict in result.conflicts:
            assert conflict.portal != conflict.cluster
        return
    for key in {*base, *portal, *cluster}:
        b, p, c = base.get(key, ABSENT), portal.get(key, ABSENT), cluster.get(key, ABSENT)
        m = result.merged.get(key, ABSENT)
        if p != b and not (isinstance(p, dict) and isinstance(c, dict)):
            assert m == p
        if c != b and not (isinstance(p, dict) and isinstance(c, dict)):
            assert m == c
