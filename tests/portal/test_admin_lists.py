"""The admin's changelists at any depth: the pool filter's choices follow the rows as they change
(read from the index, nothing cached to go stale), pages in cluster order show every row once with
the filter kept, and a count beyond the bound says it is an estimate."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib import admin
from django.contrib.admin import ModelAdmin
from django.contrib.auth.models import User

from clusters.models import Cluster
from clusters.web import list_costs
from models_app.models import InferenceModel
from tests.accounts.conftest import sample_in, store

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/models_app/inferencemodel/"
ROW = re.compile(r'<th class="field-name"><a href="/admin/models_app/inferencemodel/(\d+)/change/')


def _in_pool(cluster: Cluster, namespace: str, name: str, pool: str) -> InferenceModel:
    manifest = sample_in("InferenceModel", namespace, name=name)
    manifest["spec"]["nodeSelector"] = {"inference-pool": pool}
    return store(cluster, manifest)


@pytest.fixture
def admin_browser(client):
    client.force_login(User.objects.create_superuser("admin-lists", email="", password=None))
    return client


def _pool_choices(browser) -> set[str]:
    page = html.unescape(browser.get(CHANGELIST).content.decode())
    return set(re.findall(r'href="\?node_pool=([^"&]+)"', page))


def test_the_pool_filter_follows_the_rows_as_they_change(world, admin_browser):
    before = _pool_choices(admin_browser)
    assert "gpu-new" not in before
    added = _in_pool(world.cluster, "vision", "fresh", "gpu-new")
    assert _pool_choices(admin_browser) == before | {"gpu-new"}
    InferenceModel.objects.filter(pk=added.pk).update(node_pool="gpu-renamed")  # a bulk write, no signal
    assert _pool_choices(admin_browser) == before | {"gpu-renamed"}
    InferenceModel.objects.filter(pk=added.pk).delete()
    assert _pool_choices(admin_browser) == before


def test_filtered_pages_in_cluster_order_show_every_row_once(world, admin_browser):
    west = Cluster.objects.create(name="west", auth_method=Cluster.AuthMethod.SNAPSHOT)
    for index in range(70):
        for cluster in (world.cluster, west):
            _in_pool(cluster, ("vision", "nlp")[index % 2], f"pooled-{index:03d}", "gpu-paged")
    _in_pool(world.cluster, "vision", "elsewhere", "gpu-other")
    pages = []
    for number in (1, 2):
        body = admin_browser.get(CHANGELIST, {"node_pool__exact": "gpu-paged", "p": number}).content.decode()
        pages.append([int(pk) for pk in ROW.findall(body)])
    seen = [pk for page in pages for pk in page]
    rows = InferenceModel.objects.filter(node_pool="gpu-paged")
    assert len(pages[0]) == 100 and len(seen) == len(set(seen)) == rows.count() == 140
    expected = list(rows.order_by("cluster__name", "namespace", "name").values_list("pk", flat=True))
    assert seen == expected


def test_a_count_beyond_the_bound_is_shown_as_an_estimate(world, admin_browser, monkeypatch):
    for index in range(12):
        _in_pool(world.cluster, "vision", f"counted-{index:02d}", "gpu-counted")
    exact = admin_browser.get(CHANGELIST).content.decode()
    assert f"{InferenceModel.objects.count()} inference models" in exact
    monkeypatch.setattr(list_costs, "COUNT_BOUND", 10)
    # in the default order the count is exact whatever the bound: the per-cluster counts its pages
    # are found with (from the (cluster, namespace, name) index) add up to it
    default = admin_browser.get(CHANGELIST).content.decode()
    assert f"{InferenceModel.objects.count()} inference models" in default and "an estimate" not in default
    estimated = admin_browser.get(CHANGELIST, {"o": "-2"}).content.decode()  # another order: bounded
    assert "about " in estimated and "an estimate" in estimated


def test_the_row_checkbox_is_djangos_own(world):
    """The changelist writes the action checkbox out (clusters.web.admin.KubeObjectAdmin.action_checkbox):
    it must stay the HTML Django's widget renders, which the admin's actions JavaScript reads."""
    model_admin = admin.site._registry[InferenceModel]
    for obj in InferenceModel.objects.all():
        assert str(model_admin.action_checkbox(obj)) == str(ModelAdmin.action_checkbox(model_admin, obj))
