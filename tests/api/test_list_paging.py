"""API pages read ids first (deferred join) and break ties: walking the pages yields every row once, in order."""

from __future__ import annotations

import base64
import json

import pytest
from django.db import connection
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from accounts.access import restrict
from bench.dataset import build
from clusters.models import Cluster
from clusters.web import list_costs
from clusters.web.filtersets import ClusterFilterSet
from models_app.models import InferenceModel


def _staff_client(clusters: int, per_cluster: int) -> APIClient:
    """A staff client over ``clusters`` x ``per_cluster`` InferenceModels of the bench dataset, whose
    names repeat in every cluster (ordering by name alone ties)."""
    data = build(clusters=clusters, models_per_cluster=per_cluster, kubeai_models=0, model_services=0, runs=0,
                 observations=0, member_rows=per_cluster, analyze=False)  # fmt: skip
    client = APIClient()
    client.force_authenticate(data.staff)
    return client


@pytest.mark.django_db
@pytest.mark.parametrize("ordering", ["name", "-name", "memory_bytes"])
def test_offset_pages_cover_every_row_once_in_order(ordering):
    # the same names in both clusters: ordering by name alone ties on every row
    client = _staff_client(clusters=2, per_cluster=20)
    seen: list[int] = []
    for offset in range(0, 45, 7):
        page = client.get(f"/api/inferencemodels/?limit=7&offset={offset}&ordering={ordering}").json()
        assert page["count"] == 40
        seen += [row["id"] for row in page["results"]]
    way = "-" if ordering.startswith("-") else ""
    expected = InferenceModel.objects.order_by(ordering, f"{way}namespace", f"{way}pk").values_list("pk", flat=True)
    assert seen == list(expected)
    assert len(set(seen)) == 40


@pytest.mark.django_db
def test_search_finds_substrings_in_every_searched_column():
    client = _staff_client(clusters=1, per_cluster=30)
    by_name = client.get("/api/inferencemodels/?q=DEL-0001").json()  # case-insensitive, inside the name
    names = sorted(row["metadata"]["name"] for row in by_name["results"])
    assert names == [f"model-0001{digit}" for digit in range(10)]
    by_model_name = client.get("/api/inferencemodels/?q=llama-7-instr").json()
    assert [row["metadata"]["name"] for row in by_model_name["results"]] == ["model-00007"]


@pytest.mark.django_db
def test_default_order_pages_step_over_clusters_by_their_counts():
    """The default order (cluster name, namespace, name) is paged by clusters' row counts
    (clusters.web.api.pagination.ids_in_cluster_order): clusters named against their ids' order, of
    uneven sizes, one empty, pages straddling two or three of them; staff and a team member."""
    data = build(clusters=4, models_per_cluster=12, kubeai_models=0, model_services=0, runs=0, observations=0,
                 member_rows=12, analyze=False)  # fmt: skip
    clusters = list(Cluster.objects.order_by("pk"))
    for cluster, name in zip(clusters, ["zeta", "alpha", "mid", "beta"], strict=True):
        Cluster.objects.filter(pk=cluster.pk).update(name=name)
    InferenceModel.objects.filter(cluster=clusters[1], pk__in=InferenceModel.objects.filter(cluster=clusters[1])
                                  .values_list("pk", flat=True)[:9]).delete()  # fmt: skip
    InferenceModel.objects.filter(cluster=clusters[3]).delete()
    Cluster.objects.create(name="aaa-empty", auth_method=Cluster.AuthMethod.SNAPSHOT)
    for user in (data.staff, data.member):
        client = APIClient()
        client.force_authenticate(user)
        visible = restrict(InferenceModel.objects.all(), user)
        expected = list(visible.order_by("cluster__name", "namespace", "name").values_list("pk", flat=True))
        for limit in (1, 4, 7, 50):
            seen: list[int] = []
            for offset in range(0, len(expected) + limit, limit):
                page = client.get(f"/api/inferencemodels/?limit={limit}&offset={offset}").json()
                assert page["count"] == len(expected)
                seen += [row["id"] for row in page["results"]]
            assert seen == expected, (user, limit)


@pytest.mark.django_db
def test_a_count_beyond_the_bound_is_marked_as_an_estimate(monkeypatch):
    client = _staff_client(clusters=2, per_cluster=20)
    exact = client.get("/api/inferencemodels/?limit=5&ordering=name").json()
    assert (exact["count"], exact["count_estimated"]) == (40, False)
    monkeypatch.setattr(list_costs, "COUNT_BOUND", 10)
    estimated = client.get("/api/inferencemodels/?limit=5&ordering=name").json()
    assert estimated["count_estimated"] is True and estimated["count"] > 10 and len(estimated["results"]) == 5
    default_order = client.get("/api/inferencemodels/?limit=5").json()  # counted per cluster, exactly
    assert (default_order["count"], default_order["count_estimated"]) == (40, False)


def _walk_links(client: APIClient, url: str, link: str) -> list[list[int]]:
    """Every page from ``url``, following ``link`` (next or previous) to the end."""
    pages = []
    while url:
        response = client.get(url)
        assert response.status_code == 200, response.content
        pages.append([row["id"] for row in response.json()["results"]])
        url = response.json()[link]
    return pages


@pytest.mark.django_db
@pytest.mark.parametrize("ordering", ["name", "-name", "namespace", "-created_at"])
def test_next_links_carry_a_cursor_and_walk_every_row_once_both_ways(ordering):
    """Where the order allows a keyset (its terms one way, the list's own, never NULL), next and
    previous links carry a cursor: no offset is stepped over however deep, and walking them yields
    every row once, in order, forwards and back."""
    client = _staff_client(clusters=2, per_cluster=20)
    first = client.get(f"/api/inferencemodels/?limit=7&ordering={ordering}").json()
    assert "cursor=" in first["next"] and "offset=" not in first["next"] and first["previous"] is None
    with CaptureQueriesContext(connection) as queries:
        assert client.get(first["next"]).status_code == 200
    # the count's probe (clusters.web.list_costs) steps over at most COUNT_BOUND rows, whatever the depth
    paging = [query["sql"] for query in queries.captured_queries if "COALESCE((SELECT" not in query["sql"]]
    assert not any("OFFSET" in sql for sql in paging)
    forward = _walk_links(client, f"/api/inferencemodels/?limit=7&ordering={ordering}", "next")
    way = "-" if ordering.startswith("-") else ""
    terms = [ordering, *(f"{way}{key}" for key in ("namespace", "pk") if key != ordering.lstrip("-"))]
    expected = list(InferenceModel.objects.order_by(*terms).values_list("pk", flat=True))
    assert [pk for page in forward for pk in page] == expected
    assert [len(page) for page in forward] == [7] * 5 + [5]
    last = client.get(forward and f"/api/inferencemodels/?limit=7&ordering={ordering}&offset=35").json()
    backward = _walk_links(client, last["previous"], "previous")
    assert [pk for page in backward[::-1] for pk in page] + [row["id"] for row in last["results"]] == expected


@pytest.mark.django_db
def test_orders_without_a_keyset_keep_offset_links():
    client = _staff_client(clusters=2, per_cluster=10)
    for query in ("", "&ordering=memory_bytes", "&ordering=cluster__name"):  # the default order: another table's
        page = client.get(f"/api/inferencemodels/?limit=5{query}").json()
        assert "offset=5" in page["next"] and "cursor=" not in page["next"]
    refused = client.get("/api/inferencemodels/?limit=5&ordering=memory_bytes&cursor=abc")
    assert refused.status_code == 400 and "use offset" in refused.json()["cursor"][0]


@pytest.mark.django_db
def test_a_cursor_that_is_not_one_is_a_clear_400():
    client = _staff_client(clusters=1, per_cluster=10)
    by_name = client.get("/api/inferencemodels/?limit=3&ordering=name").json()["next"]
    token = by_name.split("cursor=")[1].split("&")[0]
    forged = base64.urlsafe_b64encode(json.dumps(
        {"order": ["name", "namespace", "pk"], "before": False, "values": ["a", "b", 2**70]}).encode()).decode()
    # a cursor of another order: by -name the terms are -name, -namespace, -pk
    for cursor in ("%%%", "bm90IGpzb24", token + "x" * 8, forged):
        response = client.get(f"/api/inferencemodels/?limit=3&ordering=name&cursor={cursor}")
        assert response.status_code == 400 and "is not a position in this list" in response.json()["cursor"][0]
    other_order = client.get(f"/api/inferencemodels/?limit=3&ordering=-name&cursor={token}")
    assert other_order.status_code == 400 and "'-name,-namespace,-pk'" in other_order.json()["cursor"][0]


@pytest.mark.django_db
def test_the_filter_backend_filters_whenever_a_filter_is_named():
    # the backend skips django-filter only when the query names no filter (clusters.web.api.filtering)
    client = _staff_client(clusters=1, per_cluster=6)
    InferenceModel.objects.filter(pk__in=InferenceModel.objects.order_by("pk").values("pk")[:2]).update(
        sync_state="Error"
    )

    def count(query: str) -> int:
        response = client.get(f"/api/inferencemodels/?{query}")
        assert response.status_code == 200, response.content
        return response.json()["count"]

    assert count("") == count("limit=3") == count("name=") == 6
    assert count("sync_state=Error") == count("sync_state=Error&name=") == 2
    for refused in ("sync_state=", "sync_state=Error&sync_state="):  # validated as before
        assert client.get(f"/api/inferencemodels/?{refused}").status_code == 400, refused


@pytest.mark.django_db
def test_a_boolean_filter_refuses_what_is_not_a_boolean():
    """Django's NullBooleanField reads any unknown value as "no value": ?ready=maybe answered every row."""
    client = _staff_client(clusters=1, per_cluster=4)
    InferenceModel.objects.filter(pk=InferenceModel.objects.order_by("pk").values("pk")[:1]).update(ready=True)
    InferenceModel.objects.exclude(pk=InferenceModel.objects.order_by("pk").values("pk")[:1]).update(ready=False)
    assert client.get("/api/inferencemodels/?ready=true").json()["count"] == 1
    assert client.get("/api/inferencemodels/?ready=false").json()["count"] == 3
    assert client.get("/api/inferencemodels/?ready=").json()["count"] == 4
    assert client.get("/api/inferencemodels/?ready=1").json()["count"] == 1  # the select knew no "1"
    response = client.get("/api/inferencemodels/?ready=maybe")
    assert response.status_code == 400 and response.json() == {"ready": ["must be true or false"]}
    assert not ClusterFilterSet(QueryDict("healthy=yes"), queryset=Cluster.objects.all()).is_valid()  # generated


@pytest.mark.django_db
@pytest.mark.parametrize("query", ["&ordering=name", "&ordering=name&offset=7", "", "&offset=12"])
def test_a_page_joins_its_rows_cluster_name_only_and_finds_them_without_a_join(query):
    """The rows are read with their cluster's name (one column, joined): no Cluster is built per row,
    with its credentials decrypted; the queries that count the list and find the page's ids read
    the list's own table (an index) alone. A cursor page reads the same way."""
    client = _staff_client(clusters=2, per_cluster=10)
    Cluster.objects.update(bearer_token="s3cr3t-token")
    with CaptureQueriesContext(connection) as queries:
        page = client.get(f"/api/inferencemodels/?limit=7{query}").json()
        following = client.get(page["next"]).json()
    table = InferenceModel._meta.db_table
    reads = [query["sql"] for query in queries.captured_queries if f'FROM "{table}"' in query["sql"]]
    rows = [sql for sql in reads if f'"{table}"."spec"' in sql]
    assert len(rows) == 2 and all('"clusters_cluster"."name" AS "cluster_name"' in sql for sql in rows)
    assert not any("bearer_token" in sql for sql in rows)
    assert not any("clusters_cluster" in sql for sql in reads if sql not in rows)
    names = dict(Cluster.objects.values_list("pk", "name"))
    expected = {row.pk: names[row.cluster_id] for row in InferenceModel.objects.all()}
    assert [(row["id"], row["cluster"]) for row in page["results"] + following["results"]] == [
        (row["id"], expected[row["id"]]) for row in page["results"] + following["results"]
    ]
