"""What-if answers in pages: the API's first page and its cursors give back exactly the full plan
(as recorded from the implementation that built every list whole); a cursor of a plan that changed
is refused; the planning page shows the first entries and how many more; bad paging input is a
400 naming it."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from clusters.models import Cluster
from models_app.models import InferenceModel
from scheduler.models import Node, NodePool
from scheduler.planning.pages import Answer, Sorted, long_lists
from scheduler.planning.planner import plan, plan_to_dict
from scheduler.planning.proposals import proposal_from_request
from tests.scheduler.conftest import GI, NOW, make_model, make_pool, whole

RECORDED = Path(__file__).with_name("plan_recorded.json")
"""``full_plan(crowded)`` as the planner answered it when it built every list whole, then cut it."""

ESTIMATE = {"estimate": {"name": "new", "namespace": "default", "pool": "gpu", "memory": "40Gi"}}
BODY = {"models": [ESTIMATE], "now": NOW.isoformat()}


@pytest.fixture
def crowded(cluster):
    """A pool of two 64Gi nodes under 40 running models of 4-12Gi (half idle): long node lists,
    running models that no longer fit, idle models and right-sizings to offer; and 25 running
    models in a pool no node has."""
    make_pool(cluster, "gpu", nodes=["64Gi", "64Gi"])
    for index in range(40):
        make_model(cluster, f"m{index:02d}", f"{4 + index % 3 * 4}Gi", peak="2Gi",
                   last_request=NOW - timedelta(hours=2 if index % 2 else 0))  # fmt: skip
    for index in range(25):
        make_model(cluster, f"lost{index:02d}", "1Gi", pool="gone")
    return cluster


def full_plan(cluster, estimate: dict[str, Any] = ESTIMATE, now=NOW) -> dict[str, Any]:
    """The whole answer, computed directly (staff sees every model, so nothing is redacted)."""
    return whole(planned(cluster, estimate, now))


def planned(cluster, estimate: dict[str, Any] = ESTIMATE, now=NOW) -> Answer:
    proposals = [proposal_from_request(estimate, 0, cluster)]
    return plan_to_dict(plan(Cluster.objects.get(pk=cluster.pk), proposals, now=now))


def every_list(client, limit: int) -> tuple[dict[str, Any], dict[str, list]]:
    """The first page, and each long list put back together by following its cursors."""
    first = client.post(f"/api/planning/plan/?limit={limit}", BODY, format="json")
    assert first.status_code == 200, first.content
    body = first.json()
    lists = {path: list(owner[key]) for path, owner, key in long_lists(body)}
    for page in body["pages"]:
        cursor = page["cursor"]
        while cursor:
            answer = client.post(f"/api/planning/plan/?limit={limit}&cursor={cursor}", BODY, format="json").json()
            assert answer["list"] == page["list"] and answer["total"] == page["total"]
            assert len(answer["items"]) <= limit
            lists[page["list"]] += answer["items"]
            cursor = answer["cursor"]
    return body, lists


def test_the_whole_answer_is_the_one_recorded_when_every_list_was_built_whole(crowded):
    assert full_plan(crowded) == json.loads(RECORDED.read_text())


def test_pages_put_together_are_the_full_plan(api_as, crowded):
    full = json.loads(RECORDED.read_text())
    expected = {path: owner[key] for path, owner, key in long_lists(copy.deepcopy(full))}
    assert max(len(entries) for entries in expected.values()) > 20  # the fixture has long lists
    client = api_as(staff=True)
    body, lists = every_list(client, limit=3)
    assert lists == expected
    assert body["pages"] and all(page["total"] > 3 for page in body["pages"])
    # everything but the cut lists is the full answer
    for _, owner, key in long_lists(body):
        owner[key] = None
        owner.pop(f"{key}_more", None)
    for _, owner, key in long_lists(full):
        owner[key] = None
    body.pop("pages")
    assert body == full


def test_a_limit_above_every_list_answers_the_full_plan_in_one_page(api_as, crowded):
    body = api_as(staff=True).post("/api/planning/plan/?limit=1000", BODY, format="json").json()
    assert body.pop("pages") == []
    assert body == full_plan(crowded)


def test_a_cursor_of_a_plan_that_changed_is_refused(api_as, crowded):
    client = api_as(staff=True)
    first = client.post("/api/planning/plan/?limit=2", BODY, format="json").json()
    cursor = first["pages"][0]["cursor"]
    assert client.post(f"/api/planning/plan/?limit=2&cursor={cursor}", BODY, format="json").status_code == 200
    make_model(crowded, "late", "8Gi")
    refused = client.post(f"/api/planning/plan/?limit=2&cursor={cursor}", BODY, format="json")
    assert refused.status_code == 409
    assert "changed since the cursor was given" in refused.json()["cursor"][0]
    later = client.post("/api/planning/plan/?limit=2", BODY, format="json").json()["pages"][0]["cursor"]
    InferenceModel.objects.filter(cluster=crowded, name="m00").update(last_active_at=NOW - timedelta(hours=3))
    assert client.post(f"/api/planning/plan/?limit=2&cursor={later}", BODY, format="json").status_code == 409


def changes(cluster: Cluster) -> list[Callable[[], Any]]:
    """Writes after which a plan may or may not answer otherwise: none, some that change nothing a
    plan reads, and one of each thing a plan is computed from."""
    models = InferenceModel.objects.filter(cluster=cluster)
    return [
        lambda: None,
        lambda: models.filter(name="m03").update(utilization_percent=90, last_error="not read by a plan"),
        lambda: models.filter(name="m01").update(last_active_at=NOW),  # no longer idle
        lambda: models.filter(name="m02").update(last_active_at=NOW - timedelta(hours=5)),  # idle since earlier
        lambda: make_model(cluster, "late", "8Gi"),
        lambda: models.filter(name="m04").update(memory_bytes=6 * GI),
        lambda: models.filter(name="m06").update(running_replicas=0),
        lambda: models.filter(name="lost03").delete(),
        lambda: Node.objects.filter(pool__cluster=cluster, name="gpu-1").update(allocatable_bytes=80 * GI),
        lambda: NodePool.objects.filter(cluster=cluster, name="gpu").update(budget_bytes=100 * GI),
        lambda: Node.objects.filter(pool__cluster=cluster, name="gpu-0").update(schedulable=False),
    ]


def test_equal_versions_are_equal_answers_whatever_changed(crowded):
    """The version a cursor carries moves whenever the answer does (for any request, at any
    ``now``), and stays while nothing the plan reads changed, or the pages of a list could skip or
    repeat entries, or never be read at all."""
    bigger = {"estimate": {**ESTIMATE["estimate"], "memory": "41Gi"}}
    answers: dict[str, dict[str, Any]] = {}
    versions = []
    for change in changes(crowded):
        change()
        for estimate in (ESTIMATE, bigger):
            for now in (NOW, NOW + timedelta(hours=3)):
                answer = planned(crowded, estimate, now)
                assert answers.setdefault(answer.version, whole(answer)) == whole(answer)
        versions.append(planned(crowded).version)
    assert versions[0] == versions[1]  # nothing, and nothing a plan reads
    assert len(set(versions[1:])) == len(versions) - 1  # each of the others moved it


@pytest.mark.parametrize(
    ("query", "field", "rule"),
    [
        ("limit=0", "limit", "must be an integer from 1 to 1000"),
        ("limit=many", "limit", "must be an integer from 1 to 1000"),
        ("limit=1001", "limit", "must be an integer from 1 to 1000"),
        ("cursor=not-a-cursor", "cursor", "is not a cursor this API gave"),
    ],
)
def test_bad_paging_input_is_a_400_naming_it(api_as, crowded, query, field, rule):
    answer = api_as(staff=True).post(f"/api/planning/plan/?{query}", BODY, format="json")
    assert answer.status_code == 400
    assert rule in answer.json()[field][0]


def test_the_page_shows_the_first_entries_and_how_many_more(make_user, crowded):
    client = Client()
    client.force_login(make_user("planner", staff=True))
    form = {"cluster": "prod", "include_running": "on",
            "models": "- estimate: {name: new, namespace: default, pool: gpu, memory: 40Gi}"}  # fmt: skip
    page = client.post("/planning/", form).content.decode()
    assert 'id="plan-paged"' in page
    full = full_plan(crowded)
    longest = max((owner[key] for _, owner, key in long_lists(full)), key=len)
    assert f"and {len(longest) - 20} more" in page


def test_a_sorted_list_answers_every_slice_as_a_sort_would():
    labels = {f"Kind ns/m{(index * 7919) % 1000:04d}" for index in range(1000)}
    whole = sorted(labels)
    for index in (0, 3, 20, 999, 1000, 5000, slice(0, 20), slice(None, 3), slice(20, 40), slice(0, 0),
                  slice(990, 2000), slice(-5, None), slice(0, 1000), slice(0, 5000), -1):  # fmt: skip
        ranked = Sorted(labels)
        if isinstance(index, int) and index >= len(whole):
            with pytest.raises(IndexError):
                ranked[index]
        else:
            assert ranked[index] == whole[index], index
    ranked = Sorted(labels)
    assert ranked[:5] == whole[:5] and ranked[5:10] == whole[5:10] and ranked[:5] == whole[:5]
