"""Showback of a small fixture against a hand computation, /api/usage/, the team pages, the banner,
/api/limits/ and the budget metric: each team sees its own and nobody else's."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from accounts.models import NamespaceGrant, Team
from governance.ledger import OrmSink
from governance.limits import budget_key, month_bounds
from governance.models import LEDGER_COLUMNS, UNUSED, GpuPrice, GpuSample, Limit, TokenPrice
from governance.partitions import ensure_partitions
from governance.sampling import record_samples

pytestmark = pytest.mark.django_db

NOV = datetime(2030, 11, 3, 10, tzinfo=UTC)


@pytest.fixture
def teams(make_user):
    team_a, team_b = Team.objects.create(name="team-a"), Team.objects.create(name="team-b")
    NamespaceGrant.objects.create(team=team_a, cluster=None, namespace="ns-a")
    NamespaceGrant.objects.create(team=team_b, cluster=None, namespace="ns-b")
    return {"alice": make_user("alice", teams=[team_a]), "bob": make_user("bob", teams=[team_b]),
            "staff": make_user("root", staff=True, teams=[],
                               perms=["governance.add_limit", "governance.change_limit", "governance.view_limit"])}


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def sample(at: datetime, team: str, model: str, product: str, gpus: int, seconds: int, idle: bool = False) -> None:
    """A GPU sample, written as the sampler writes them (with its rollup)."""
    record_samples([GpuSample(sampled_at=at, period_seconds=seconds, team=team, model=model, cluster_id=1,
                              namespace="", node_pool="pool", gpu_product=product, gpus=gpus, idle=idle)])


def request(at: datetime, team: str, model: str, prompt: int, completion: int, latency: float = 10.0) -> None:
    """A ledger row, written by the gateway's writer through Django's connection (the test's
    transaction), with its rollups."""
    values = {"started_at": at, "team": team, "username": "u", "token_name": "", "model": model, "cluster_id": None,
              "namespace": "", "status": 200, "latency_ms": latency, "first_byte_ms": None, "prompt_tokens": prompt,
              "completion_tokens": completion, "stream": False}
    OrmSink().write([tuple(values[name] for name in LEDGER_COLUMNS)], [None])


@pytest.fixture
def month_of_usage(teams) -> None:
    if connection.vendor == "postgresql":  # the ledger's partitions of those months
        with connection.cursor() as cursor:
            ensure_partitions(cursor, [NOV - timedelta(days=10), NOV])
    GpuPrice.objects.create(gpu_product="NVIDIA-H100", price_per_gpu_hour=Decimal("2.3333"))
    GpuPrice.objects.create(gpu_product="NVIDIA-L4", price_per_gpu_hour=Decimal("0.70"))
    TokenPrice.objects.create(model="shared-llm", price_per_million_tokens=Decimal("0.40"))
    for hour in range(4):  # team-a's model: 2 H100s, half-hour samples, the last one idle
        sample(NOV + timedelta(hours=hour), "team-a", "a-llm", "NVIDIA-H100", 2, 1800, idle=hour == 3)
    for hour in range(5):  # team-b's model: 1 L4, hourly samples, two idle
        sample(NOV + timedelta(days=1, hours=hour), "team-b", "b-llm", "NVIDIA-L4", 1, 3600, idle=hour >= 3)
    sample(NOV, UNUSED, "", "NVIDIA-H100", 2, 7200)  # 2 H100s nobody held for 2 hours
    sample(NOV - timedelta(days=10), "team-a", "a-llm", "NVIDIA-H100", 8, 3600)  # October: outside the month
    for prompt, completion in ((100, 50), (200, 100), (300, 150)):
        request(NOV, "team-a", "a-llm", prompt, completion)
    request(NOV + timedelta(days=1), "team-b", "shared-llm", 1_000_000, 0)
    request(NOV + timedelta(days=1), "team-b", "shared-llm", 0, 500_000)


def rows(response) -> dict[tuple[str, str | None], dict]:
    assert response.status_code == 200, response.content
    return {(row["team"], row["model"]): row for row in response.json()["results"]}


def test_showback_equals_the_hand_computation_to_the_cent(teams, month_of_usage) -> None:
    found = rows(client_for(teams["staff"]).get("/api/usage/?from=2030-11-01&to=2030-11-30"))
    assert set(found) == {("team-a", "a-llm"), ("team-b", "b-llm"), ("team-b", "shared-llm"), (UNUSED, None)}
    a = found[("team-a", "a-llm")]
    # 4 samples x 2 GPUs x 0.5 h = 4 GPU-h x 2.3333 = 9.3332; idle: 1 GPU-h = 2.3333
    assert (a["requests"], a["prompt_tokens"], a["completion_tokens"]) == (3, 600, 300)
    assert (a["gpu_hours"], a["idle_gpu_hours"], a["cost"], a["idle_cost"]) == (4.0, 1.0, 9.33, 2.33)
    assert a["cost_per_million_tokens"] == 10370.22  # 9.3332 / 900 tokens x 1M
    b = found[("team-b", "b-llm")]
    assert (b["requests"], b["gpu_hours"], b["idle_gpu_hours"], b["cost"], b["idle_cost"]) == (0, 5.0, 2.0, 3.5, 1.4)
    shared = found[("team-b", "shared-llm")]  # no GPU of team-b's: priced per token, 1.5M x 0.40
    assert (shared["requests"], shared["gpu_hours"], shared["cost"], shared["cost_per_million_tokens"]) == (
        2, 0.0, 0.6, 0.4)
    unused = found[(UNUSED, None)]
    assert (unused["gpu_hours"], unused["cost"]) == (4.0, 9.33)
    # every GPU-hour of the month is in one row: 8 + 5 held, 4 unused
    assert sum(row["gpu_hours"] for row in found.values()) == 4 + 5 + 4


def test_usage_by_day_and_filters(teams, month_of_usage) -> None:
    client = client_for(teams["staff"])
    daily = client.get("/api/usage/?from=2030-11-01&to=2030-11-30&group_by=day&team=team-b").json()["results"]
    assert [(row["day"], row["model"], row["requests"]) for row in daily] == [
        ("2030-11-04", "b-llm", 0), ("2030-11-04", "shared-llm", 2)]
    assert client.get("/api/usage/?from=2030-11-01&to=2030-11-30&model=a-llm").json()["results"][0]["cost"] == 9.33
    october = rows(client.get("/api/usage/?from=2030-10-01&to=2030-10-31"))
    assert october[("team-a", "a-llm")]["cost"] == 18.67  # 8 GPU-h x 2.3333 = 18.6664


@pytest.mark.parametrize(("query", "field"), [
    ("from=2030-13-01", "from"), ("to=yesterday", "to"), ("from=2030-11-05&to=2030-11-01", "to"),
    ("group_by=week", "group_by"), ("from=2020-01-01&to=2030-01-01", "to"),
    ("limit=0", "limit"), ("limit=abc", "limit"), ("limit=1001", "limit"), ("offset=-1", "offset"),
    ("offset=%C2%B2", "offset"),
])
def test_bad_usage_filters_are_400s_naming_the_parameter(teams, query, field) -> None:
    response = client_for(teams["staff"]).get(f"/api/usage/?{query}")
    assert response.status_code == 400 and field in response.json()


@pytest.mark.parametrize("group_by", ["", "day"])
def test_usage_pages_follow_links_and_totals_cover_every_page(teams, month_of_usage, group_by) -> None:
    client = client_for(teams["staff"])
    url = f"/api/usage/?from=2030-11-01&to=2030-11-30&group_by={group_by}"
    whole = client.get(url + "&limit=1000").json()
    assert whole["next"] is None and whole["count"] == len(whole["results"]) >= 4
    paged, pages, link = [], [], url + "&limit=1"
    while link:
        page = client.get(link).json()
        assert len(page["results"]) == 1 and page["count"] == whole["count"]
        assert page["totals"] == whole["totals"]  # the whole selection's, on every page
        paged += page["results"]
        pages.append(page)
        link = page["next"]
    assert paged == whole["results"] and pages[0]["previous"] is None and pages[-1]["previous"]
    totals = whole["totals"]
    # 4 + 5 GPU-hours held, 4 unused; 9.3332 + 3.5 + 0.6 + 9.3332 summed exactly, rounded once
    assert (totals["gpu_hours"], totals["cost"], totals["requests"]) == (13.0, 22.77, 5)
    assert (totals["prompt_tokens"], totals["completion_tokens"]) == (1_000_600, 500_300)
    assert client.get(url).json()["results"] == whole["results"][:50]  # the default page, 50 rows


def test_a_member_sees_only_their_teams_rows_on_every_page(teams, month_of_usage) -> None:
    for day in (5, 6, 7):  # team-a's rows on more days, amid team-b's, so there are pages to walk
        sample(NOV + timedelta(days=day), "team-a", "a-llm", "NVIDIA-H100", 1, 3600)
        sample(NOV + timedelta(days=day), "team-b", "b-llm", "NVIDIA-L4", 1, 3600)
    alice = client_for(teams["alice"])
    link, seen = "/api/usage/?from=2030-11-01&to=2030-11-30&group_by=day&limit=1", []
    while link:
        page = alice.get(link).json()
        seen += [row["team"] for row in page["results"]]
        assert page["totals"]["gpu_hours"] == 7.0  # team-a's alone (4 + 3), not team-b's too
        link = page["next"]
    assert seen == ["team-a"] * 4  # one row a page, every one of them team-a's


def test_a_team_sees_only_its_own_usage(teams, month_of_usage) -> None:
    alice = client_for(teams["alice"])
    assert set(rows(alice.get("/api/usage/?from=2030-11-01&to=2030-11-30"))) == {("team-a", "a-llm")}
    refused = alice.get("/api/usage/?team=team-b&from=2030-11-01&to=2030-11-30")
    assert refused.status_code == 400 and "team-b" in refused.json()["team"][0]
    assert alice.get("/api/usage/?model=shared-llm&from=2030-11-01&to=2030-11-30").json()["results"] == []
    assert client_for(teams["bob"]).get("/api/usage/").status_code == 200
    assert APIClient().get("/api/usage/").status_code == 401


def test_team_page_csv_and_isolation(client, teams, month_of_usage) -> None:
    Limit.objects.create(team=Team.objects.get(name="team-a"), requests_per_minute=60, monthly_tokens=1000)
    Limit.objects.create(team=Team.objects.get(name="team-b"), requests_per_minute=7)
    client.force_login(teams["alice"])
    page = client.get("/teams/team-a/usage/?month=2030-11")
    assert page.status_code == 200
    text = page.content.decode()
    assert "9.33" in text and "a-llm" in text and "<svg" in text and "60" in text
    assert "shared-llm" not in text and "b-llm" not in text
    assert client.get("/teams/team-b/usage/").status_code == 404
    assert client.get("/teams/team-b/usage.csv?month=2030-11").status_code == 404
    assert client.get("/teams/team-a/usage/?month=11-2030").status_code == 400
    exported = client.get("/teams/team-a/usage.csv?month=2030-11")
    assert exported["Content-Type"] == "text/csv" and exported.streaming
    lines = list(csv.DictReader(io.StringIO(b"".join(exported.streaming_content).decode())))
    assert [(line["day"], line["model"], line["cost"]) for line in lines] == [("2030-11-03", "a-llm", "9.33")]
    assert "team-b" not in client.get("/usage/").content.decode()


def test_budget_warning_at_80_percent_on_the_team_page_the_banner_and_the_metric(
    client, teams, limits_redis, metrics_client
) -> None:
    team = Team.objects.get(name="team-a")
    limit = Limit.objects.create(team=team, monthly_tokens=1000)
    month, _ = month_bounds(datetime.now(UTC).timestamp())
    limits_redis.set(budget_key(limit.scope, month), 790)
    client.force_login(teams["alice"])
    assert "budget-warning" not in client.get("/account/").content.decode()
    limits_redis.set(budget_key(limit.scope, month), 850)
    banner = client.get("/account/").content.decode()
    assert "budget-warning" in banner and "85%" in banner
    assert "at least 80% used" in client.get("/teams/team-a/usage/").content.decode()
    client.force_login(teams["bob"])
    assert "budget-warning" not in client.get("/account/").content.decode()
    metrics = metrics_client.get("/metrics").content.decode()
    assert 'inference_portal_team_budget_warning{model="",team="team-a"} 1.0' in metrics
    assert 'inference_portal_team_budget_used_ratio{model="",team="team-a"} 0.85' in metrics


def test_the_budget_banner_is_read_only_by_pages_that_show_it(client, teams) -> None:
    """The admin's pages have no banner: they run none of its queries (the context processor's
    warnings are read when a template shows them)."""
    Limit.objects.create(team=Team.objects.get(name="team-a"), monthly_tokens=1000)
    staff = teams["staff"]
    Team.objects.get(name="team-a").members.add(staff)
    client.force_login(staff)
    with CaptureQueriesContext(connection) as admin_page:
        assert client.get("/admin/").status_code == 200
    with CaptureQueriesContext(connection) as portal_page:
        assert client.get("/account/").status_code == 200
    limits = Limit._meta.db_table
    assert not [query for query in admin_page.captured_queries if f'FROM "{limits}"' in query["sql"]]
    assert [query for query in portal_page.captured_queries if f'FROM "{limits}"' in query["sql"]]


def test_staff_set_limits_through_the_api_with_clear_400s(teams) -> None:
    staff = client_for(teams["staff"])
    created = staff.post("/api/limits/", {"team": "team-a", "model": None, "requests_per_minute": 5}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["model"] is None and created.json()["requests_per_minute"] == 5
    again = staff.post("/api/limits/", {"team": "team-a", "model": None, "monthly_tokens": 10_000}, format="json")
    assert again.status_code == 200 and again.json()["id"] == created.json()["id"]
    assert (again.json()["requests_per_minute"], again.json()["monthly_tokens"]) == (5, 10_000)
    per_model = staff.post("/api/limits/", {"team": "team-a", "model": "a-llm", "tokens_per_minute": 900},
                           format="json")
    assert per_model.status_code == 201
    model_wide = staff.post("/api/limits/", {"model": "a-llm", "requests_per_minute": 100}, format="json")
    assert model_wide.status_code == 201 and model_wide.json()["team"] is None
    for body, field in [
        ({"team": "nope", "requests_per_minute": 5}, "team"),
        ({"team": "team-a", "requests_per_minute": 0}, "requests_per_minute"),
        ({"team": "team-a", "tokens_per_minute": "many"}, "tokens_per_minute"),
        ({"team": "team-a", "monthly_tokens": -3}, "monthly_tokens"),
        ({"requests_per_minute": 5}, "team"),
        ({"team": "team-a", "model": "  "}, "model"),
        ({"team": 7}, "team"),
    ]:
        refused = staff.post("/api/limits/", body, format="json")
        assert refused.status_code == 400 and field in refused.json(), (body, refused.content)
    alice, bob = client_for(teams["alice"]), client_for(teams["bob"])
    assert alice.post("/api/limits/", {"team": "team-a", "requests_per_minute": 500}, format="json").status_code == 403
    seen = alice.get("/api/limits/").json()
    seen = seen["results"] if isinstance(seen, dict) else seen
    assert {(row["team"], row["model"]) for row in seen} == {("team-a", None), ("team-a", "a-llm")}
    bobs = bob.get("/api/limits/").json()
    assert (bobs["results"] if isinstance(bobs, dict) else bobs) == []
    assert bob.get(f"/api/limits/{created.json()['id']}/").status_code == 404
