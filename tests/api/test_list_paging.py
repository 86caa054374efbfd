"""API pages read ids first (deferred join) and break ties: walking the pages yields every row once, in order."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from accounts.access import restrict
from bench.dataset import build
from clusters.models import Cluster
from clusters.web import list_costs
from models_app.models import InferenceModel


@pytest.mark.django_db
@pytest.mark.parametrize("ordering", ["name", "-name", "memory_bytes"])
def test_offset_pages_cover_every_row_once_in_order(ordering):
    # the same names in both clusters: ordering by name alone ties on every row
    data = build(clusters=2, models_per_cluster=20, kubeai_models=0, model_services=0, runs=0, observations=0,
                 member_rows=20, analyze=False)  # fmt: skip
    client = APIClient()
    client.force_authenticate(data.staff)
    seen: list[int] = []
    for offset in range(0, 45, 7):
        page = client.get(f"/api/inferencemodels/?limit=7&offset={offset}&ordering={ordering}").json()
        assert page["count"] == 40
        seen += [row["id"] for row in page["results"]]
    expected = InferenceModel.objects.order_by(ordering, "namespace", "pk").values_list("pk", flat=True)
    assert seen == list(expected)
    assert len(set(seen)) == 40


@pytest.mark.django_db
def test_search_finds_substrings_in_every_searched_column():
    data = build(clusters=1, models_per_cluster=30, kubeai_models=0, model_services=0, runs=0, observations=0,
                 member_rows=30, analyze=False)  # fmt: skip
    client = APIClient()
    client.force_authenticate(data.staff)
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
    data = build(clusters=2, models_per_cluster=20, kubeai_models=0, model_services=0, runs=0, observations=0,
                 member_rows=20, analyze=False)  # fmt: skip
    client = APIClient()
    client.force_authenticate(data.staff)
    exact = client.get("/api/inferencemodels/?limit=5&ordering=name").json()
    assert (exact["count"], exact["count_estimated"]) == (40, False)
    monkeypatch.setattr(list_costs, "COUNT_BOUND", 10)
    estimated = client.get("/api/inferencemodels/?limit=5&ordering=name").json()
    assert estimated["count_estimated"] is True and estimated["count"] > 10 and len(estimated["results"]) == 5
    default_order = client.get("/api/inferencemodels/?limit=5").json()  # counted per cluster, exactly
    assert (default_order["count"], default_order["count_estimated"]) == (40, False)
