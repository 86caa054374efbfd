"""What-if answers in pages: the API's first page and its cursors give back exactly the full plan;
the planning page shows the first entries and how many more; bad paging input is a 400 naming it."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from scheduler.plan_pages import long_lists
from scheduler.planner import plan, plan_to_dict
from scheduler.proposals import proposal_from_request
from tests.scheduler.conftest import NOW, make_model, make_pool

ESTIMATE = {"estimate": {"name": "new", "namespace": "default", "pool": "gpu", "memory": "40Gi"}}
BODY = {"models": [ESTIMATE], "now": NOW.isoformat()}


@pytest.fixture
def crowded(cluster):
    """A pool of two 64Gi nodes under 40 running models of 4-12Gi (half idle): long node lists,
    running models that no longer fit, idle models and right-sizings to offer."""
    make_pool(cluster, "gpu", nodes=["64Gi", "64Gi"])
    for index in range(40):
        make_model(cluster, f"m{index:02d}", f"{4 + index % 3 * 4}Gi", peak="2Gi",
                   last_request=NOW - timedelta(hours=2 if index % 2 else 0))  # fmt: skip
    return cluster


def full_plan(cluster) -> dict[str, Any]:
    """The whole answer, computed directly (staff sees every model, so nothing is redacted)."""
    proposals = [proposal_from_request(ESTIMATE, 0, cluster)]
    return plan_to_dict(plan(cluster, proposals, now=NOW))


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


def test_pages_put_together_are_the_full_plan(api_as, crowded):
    full = full_plan(crowded)
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
    make_model(crowded, "late", "8Gi")
    cursor = first["pages"][0]["cursor"]
    refused = client.post(f"/api/planning/plan/?limit=2&cursor={cursor}", BODY, format="json")
    assert refused.status_code == 409
    assert "changed since the cursor was given" in refused.json()["cursor"][0]


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
