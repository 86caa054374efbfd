"""Every sort and filter the mirrored kinds' admin changelists offer answers, in the right order,
page after page, both ways (issue 41: each one read by index at 100,000 rows, the sorts a previous
round had withdrawn restored). The expected order is worked out here in Python from the rows'
values (nulls last going up, as PostgreSQL sorts them), not by the code under test; the values
are lowercase letters and digits, which every collation orders alike."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import models

from clusters.models import Cluster, KubeObject
from clusters.postgres_only import sorted_text_bound
from models_app.models import InferenceModel, KubeAIModel, ModelService
from runs_app.models import InferenceConfig, InferenceRun

pytestmark = pytest.mark.django_db

KINDS = (InferenceModel, KubeAIModel, ModelService, InferenceConfig, InferenceRun)
PAGE = 4  # rows a page here (the admin's 100 monkeypatched), so every list spans several pages
ROWS_PER_CLUSTER = 7
WORDS = ("", "alpha", "beta", "beta", "gamma")  # ties and a blank


@pytest.fixture
def staff_browser(client):
    client.force_login(User.objects.create_superuser("admin-sorts", email="", password=None))
    return client


def _value(field: models.Field, index: int) -> Any:
    """A value of ``field`` for the ``index``-th row: a few distinct ones, ties and nulls among them."""
    if field.choices:
        return field.choices[index % len(field.choices)][0]
    if isinstance(field, models.BooleanField):
        return index % 3 == 0
    if isinstance(field, models.IntegerField):
        return None if field.null and index % 5 == 0 else (index * 7) % 4
    if isinstance(field, models.CharField | models.TextField):
        return WORDS[index % len(WORDS)][: field.max_length]
    raise AssertionError(f"no value for {field}")


def _shown_fields(model: type[KubeObject]) -> list[models.Field]:
    """The model fields a column of the kind's changelist sorts or filters by, but the identity's."""
    model_admin = admin.site._registry[model]
    names = {_order_field(model_admin, model, column) for column in model_admin.get_list_display(None)}
    names |= {spec[0] if isinstance(spec, tuple) else spec for spec in model_admin.get_list_filter(None)}
    identity = {"cluster", "namespace", "name", "updated_at"}
    return [field for field in model._meta.concrete_fields if field.name in names - identity]


def _order_field(model_admin: admin.ModelAdmin, model: type, column: str) -> str | None:
    try:
        return model._meta.get_field(column).name
    except Exception:  # a method column: the field it sorts by
        return getattr(getattr(model_admin, column, None), "admin_order_field", None)


def _fill(model: type[KubeObject], clusters: list[Cluster], long_text: str | None = None) -> None:
    """``ROWS_PER_CLUSTER`` rows of ``model`` in each of ``clusters`` (in one statement: the
    utilization keys' triggers see them all); with ``long_text``, one row's value of that text
    column longer than its sort index holds."""
    fields = _shown_fields(model)
    rows = []
    for cluster in clusters:
        for index in range(ROWS_PER_CLUSTER):
            values = {field.name: _value(field, index + cluster.pk) for field in fields}
            rows.append(model(cluster=cluster, namespace=("alpha", "beta", "gamma")[index % 3],
                              name=f"row{index:02d}", spec={}, **values))  # fmt: skip
    if long_text:
        setattr(rows[2], long_text, "b" * (sorted_text_bound(long_text) + 1))  # between "alpha" and "beta"
    model.objects.bulk_create(rows)


def _expected(model: type[KubeObject], field: str, descending: bool, **where: Any) -> list[int]:
    """Ids in the changelist's order for ``field``: the value (the cluster's name for the cluster),
    then namespace, name and id, all the same way; nulls last going up."""
    rows = model.objects.filter(**where).values("id", "namespace", "name", "cluster__name", field)
    key_of = "cluster__name" if field == "cluster" else field

    def key(row: dict) -> tuple:
        value = row[key_of]
        return (value is None, value if value is not None else 0, row["namespace"], row["name"], row["id"])

    if field == "cluster":  # unique per cluster: no id needed, as the default order says
        ordered = sorted(rows, key=lambda row: (row["cluster__name"], row["namespace"], row["name"]))
    else:
        ordered = sorted(rows, key=key)
    ids = [row["id"] for row in ordered]
    return ids[::-1] if descending else ids


def _walk(browser, model: type[KubeObject], query: dict[str, Any], total: int) -> list[int]:
    """Every row's id over the changelist's pages for ``query``, each page answering 200."""
    path = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
    row = re.compile(rf'<th class="field-name"><a href="{path}(\d+)/change/')
    seen = []
    for number in range(1, max(1, math.ceil(total / PAGE)) + 1):
        response = browser.get(path, {**query, "p": number})
        assert response.status_code == 200, (query, number)
        seen += [int(pk) for pk in row.findall(response.content.decode())]
    return seen


def _sorts(model: type[KubeObject]) -> list[tuple[int, str]]:
    """(``o`` index, field) of every sort the changelist offers (the selection checkbox is column 0)."""
    model_admin = admin.site._registry[model]
    sortable = model_admin.get_sortable_by(None)
    return [
        (index, _order_field(model_admin, model, column))
        for index, column in enumerate(model_admin.get_list_display(None), start=1)
        if column in sortable
    ]


@pytest.fixture
def two_clusters() -> list[Cluster]:
    return [Cluster.objects.create(name=name, auth_method=Cluster.AuthMethod.SNAPSHOT) for name in ("west", "east")]


@pytest.fixture
def small_pages(monkeypatch):
    for model in KINDS:
        monkeypatch.setattr(admin.site._registry[model], "list_per_page", PAGE)


@pytest.mark.parametrize("model", KINDS, ids=lambda model: model.__name__)
def test_every_sort_answers_in_order_both_ways_on_every_page(model, two_clusters, small_pages, staff_browser):
    _fill(model, two_clusters)
    total = model.objects.count()
    sorts = _sorts(model)
    assert {"name", "namespace", "cluster", "sync_state"} <= {field for _, field in sorts}
    for index, field in sorts:
        for descending in (False, True):
            query = {"o": f"{'-' if descending else ''}{index}"}
            assert _walk(staff_browser, model, query, total) == _expected(model, field, descending), query


@pytest.mark.parametrize("model", KINDS, ids=lambda model: model.__name__)
def test_every_filter_answers_its_rows_in_cluster_order(model, two_clusters, small_pages, staff_browser):
    _fill(model, two_clusters)
    model_admin = admin.site._registry[model]
    for spec in model_admin.get_list_filter(None):
        name = spec[0] if isinstance(spec, tuple) else spec
        field = model._meta.get_field(name)
        for value in set(model.objects.values_list(field.attname, flat=True)):
            lookup = f"{name}__id__exact" if field.is_relation else f"{name}__exact"
            query = {lookup: int(value) if isinstance(value, bool) else value}
            where = {field.attname: value}
            expected = _expected(model, "cluster", False, **where)
            assert _walk(staff_browser, model, query, len(expected)) == expected, query


def test_the_restored_sorts_are_offered_and_the_write_time_is_not(two_clusters, staff_browser):
    """Model name, pool and utilization are sorted again (by their indexes: the text columns' short
    values, the utilization keys kept apart); the last write's time, which every status report
    moves, is shown unsorted."""
    _fill(InferenceModel, two_clusters)
    model_admin = admin.site._registry[InferenceModel]
    columns = model_admin.get_list_display(None)
    header = staff_browser.get("/admin/models_app/inferencemodel/").content.decode()
    for column in ("model_name", "node_pool", "utilization_percent", "cluster", "sync_state"):
        assert f"o={1 + columns.index(column)}" in header, column
    assert f"o={1 + columns.index('updated_at')}" not in header
    for model in KINDS:
        assert "updated_at" not in admin.site._registry[model].get_sortable_by(None)


@pytest.mark.parametrize("column", ["model_name", "node_pool"])
def test_a_text_sort_keeps_its_order_with_a_value_longer_than_its_index_holds(
    column, two_clusters, small_pages, staff_browser
):
    """A value the sort index leaves out (longer than it holds) is still in its place: the list is
    then sorted whole, every row."""
    _fill(InferenceModel, two_clusters, long_text=column)
    index = 1 + admin.site._registry[InferenceModel].get_list_display(None).index(column)
    total = InferenceModel.objects.count()
    for descending in (False, True):
        query = {"o": f"{'-' if descending else ''}{index}"}
        assert _walk(staff_browser, InferenceModel, query, total) == _expected(InferenceModel, column, descending)
