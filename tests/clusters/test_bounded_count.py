"""A list's bounded count (clusters.web.list_costs) reads the rows Django's ``queryset[:n].count()``
reads, at and around the bound, whatever the queryset: filtered, empty, ``none()``, distinct,
sliced, aggregated, a union (those last four counted by Django itself)."""

from __future__ import annotations

import pytest
from django.db.models import Count, Q

from clusters.models import Cluster
from clusters.web import list_costs
from clusters.web.list_costs import _rows_up_to, bounded_count
from models_app.models import InferenceModel

pytestmark = pytest.mark.django_db


def _models(cluster: Cluster, rows: int) -> None:
    InferenceModel.objects.bulk_create(
        InferenceModel(cluster=cluster, namespace=f"team-{index % 3}", name=f"m-{index:03d}", node_pool=f"p{index % 2}")
        for index in range(rows)
    )


def _querysets() -> dict[str, object]:
    models = InferenceModel.objects.all()
    return {
        "all": models,
        "filtered": models.filter(Q(namespace="team-1") | Q(node_pool="p0"), name__icontains="m-"),
        "percent in a value": models.filter(name__contains="%"),
        "nothing matches": models.filter(namespace="nobody"),
        "none": models.none(),
        "empty in": models.filter(pk__in=[]),
        "select_related": InferenceModel.objects.select_related("cluster"),
        "distinct": models.values("namespace").distinct(),
        "sliced": models.order_by("pk")[2:9],
        "aggregated": models.values("namespace").annotate(rows=Count("*")),
        "union": models.filter(namespace="team-0").union(models.filter(namespace="team-1"), all=True),
    }


@pytest.mark.parametrize("rows", [0, 1, 9, 10, 11, 12, 31])
def test_rows_up_to_counts_what_django_counts(cluster: Cluster, rows: int) -> None:
    _models(cluster, rows)
    for name, queryset in _querysets().items():
        for most in (1, 5, 10, 11, 100):
            assert _rows_up_to(queryset, most) == queryset[:most].count(), (name, most)


@pytest.mark.parametrize("rows", [9, 10, 11, 40])
def test_exact_up_to_the_bound_then_an_estimate_past_it(cluster: Cluster, rows: int, monkeypatch) -> None:
    monkeypatch.setattr(list_costs, "COUNT_BOUND", 10)
    _models(cluster, rows)
    for queryset in (InferenceModel.objects.all(), InferenceModel.objects.filter(namespace__in=["team-0", "team-1"])):
        matching = queryset.count()
        counted = bounded_count(queryset)
        if matching <= 10:
            assert (counted.rows, counted.estimated) == (matching, False)
        else:
            assert counted.estimated and counted.rows >= 11
