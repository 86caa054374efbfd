"""The admin's changelists at any depth: the pool filter's choices follow the rows as they change
(read from the index, nothing cached to go stale), pages in cluster order show every row once with
the filter kept, a count beyond the bound says it is an estimate, and the rows written by
clusters.web.admin_rows, the filters' choices written by clusters/templatetags/admin_filters.py, the
links' query strings and the action form's widgets are the HTML Django's admin writes, for staff and
team-restricted staff; a page reads only the columns it shows."""

from __future__ import annotations

import datetime
import html
import json
import re
from pathlib import Path

import django.contrib.admin
import pytest
from django import forms
from django.contrib import admin
from django.contrib.admin import ModelAdmin, helpers
from django.contrib.admin.templatetags import admin_list
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.template import Context, engines
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone, translation
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy

from clusters.models import Cluster, SyncState
from clusters.templatetags import admin_filters
from clusters.templatetags import admin_rows as admin_rows_tags
from clusters.web import admin_rows, list_costs
from clusters.web.admin import KeptActionForm, KubeObjectAdmin, NarrowChangeList
from models_app.models import InferenceModel, KubeAIModel, ModelService
from tests.accounts.conftest import sample_in, store
from tests.support.database import vacuum_analyze

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
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


def _offers_no_pool(browser) -> bool:
    """Whether the pool filter offers the rows without a pool (``?node_pool=``)."""
    return 'href="?node_pool="' in browser.get(CHANGELIST).content.decode()


def test_the_pool_filter_follows_the_rows_as_they_change(world, admin_browser):
    before = _pool_choices(admin_browser)
    assert "gpu-new" not in before
    added = _in_pool(world.cluster, "vision", "fresh", "gpu-new")
    assert _pool_choices(admin_browser) == before | {"gpu-new"}
    InferenceModel.objects.filter(pk=added.pk).update(node_pool="gpu-renamed")  # a bulk write, no signal
    assert _pool_choices(admin_browser) == before | {"gpu-renamed"}
    assert not _offers_no_pool(admin_browser)
    InferenceModel.objects.filter(pk=added.pk).update(node_pool="")  # read in the same walk as the pools
    assert _pool_choices(admin_browser) == before and _offers_no_pool(admin_browser)
    InferenceModel.objects.filter(pk=added.pk).delete()
    assert _pool_choices(admin_browser) == before and not _offers_no_pool(admin_browser)


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


MIRRORED = (InferenceModel, KubeAIModel, ModelService)
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="[^"]+"')
LISTS = [
    {},
    {"node_pool__exact": "gpu-paged"},
    {"node_pool__exact": "gpu-paged", "o": "-3.5", "q": "pooled"},  # sorted, searched: both kept in the links
    {"ready__exact": "1", "sync_state__exact": SyncState.CONFLICT},
    {"q": "<&'\">"},  # nothing found
    {"_popup": "1"},  # left to Django (clusters.web.admin_rows.covers)
]


@pytest.fixture
def varied_rows(world):
    """Rows with every shape a column takes: two clusters, blank and missing values, both booleans,
    a conflict, text needing escapes, timestamps sharing a minute and not."""
    west = Cluster.objects.create(name="west & <co>", auth_method=Cluster.AuthMethod.SNAPSHOT)
    rows = [
        _in_pool(cluster, "vision", f"pooled-{index}", "gpu-paged")
        for index in range(3)
        for cluster in (world.cluster, west)
    ]
    minute = timezone.now().replace(second=0, microsecond=0)
    for index, row in enumerate(rows):
        InferenceModel.objects.filter(pk=row.pk).update(
            updated_at=minute + datetime.timedelta(seconds=7 * index + (60 if index == 5 else 0)),
            ready=index % 2 == 0,
            model_name=["", "  ", "llama <3> & 'friends' \"x\"", "m"][index % 4],
            node_pool="" if index == 4 else "gpu-paged",
            memory_bytes=None if index == 3 else 80 * 1024**3,
            utilization_percent=None if index % 3 else 42,
            sync_state=SyncState.CONFLICT if index == 2 else SyncState.SYNCED,
        )
    KubeAIModel.objects.filter(namespace="nlp").update(replicas=None, ready=True, engine="", url="")
    ModelService.objects.filter(namespace="nlp").update(replicas=None, accelerator="", phase="  ")
    return rows


def _page(browser, model, params) -> str:
    response = browser.get(f"/admin/models_app/{model._meta.model_name}/", params)
    assert response.status_code == 200
    return CSRF.sub("", response.content.decode())


@pytest.mark.parametrize("who", ["superuser", "team_staff"])
def test_the_rows_are_the_html_djangos_admin_writes(
    varied_rows, admin_browser, make_user, world, client, who, monkeypatch
):
    if who == "team_staff":  # staff in one team, allowed to view the mirrored kinds only
        viewer = make_user("tess", perms=[f"models_app.view_{model._meta.model_name}" for model in MIRRORED],
                           staff=True, teams=[world.vision])  # fmt: skip
        client.force_login(viewer)
    browser = admin_browser if who == "superuser" else client
    for model in MIRRORED:
        model_admin = admin.site._registry[model]
        for params in LISTS:
            ours = _page(browser, model, params)
            with monkeypatch.context() as django_only:
                django_only.setattr(model_admin, "change_list_template", None)
                django_only.setattr(NarrowChangeList, "get_filters", ChangeList.get_filters)  # filter.html
                theirs = _page(browser, model, params)
            assert ours == theirs, (model, params)
    listed = _page(browser, InferenceModel, {"node_pool__exact": "gpu-paged"})
    assert "llama &lt;3&gt; &amp; &#x27;friends&#x27; &quot;x&quot;" in listed and "west &amp; &lt;co&gt;" in listed


def test_the_mirrored_kinds_rows_are_not_rendered_cell_by_cell(varied_rows, admin_browser, monkeypatch):
    """Django's ``items_for_result`` (a ``reverse()`` and a ``resolve()`` a row, every column looked up
    again for every row) is not run for a page clusters.web.admin_rows covers."""

    def refused(*args, **kwargs):
        raise AssertionError("items_for_result rendered a row")

    monkeypatch.setattr(admin_list, "items_for_result", refused)
    for model, shown in [(InferenceModel, {"node_pool": "gpu-paged"}), (KubeAIModel, {}), (ModelService, {})]:
        page = _page(admin_browser, model, {f"{key}__exact": value for key, value in shown.items()})
        assert page.count('class="action-select"') == model.objects.filter(**shown).count() > 0


FILTER_TEMPLATES = Path(django.contrib.admin.__file__).parent / "templates" / "admin", ROOT / "templates" / "admin"


def test_the_filter_template_is_djangos_with_its_choices_written_in_one_step():
    """Ours is Django's ``filter.html`` but for the tag that stands for its loop; a choice the tag
    writes itself and one it leaves to the loop's body come out as Django's loop writes them."""
    djangos = (FILTER_TEMPLATES[0] / "filter.html").read_text()
    ours = (FILTER_TEMPLATES[1] / "kube_object_filter.html").read_text()
    loop = "{% for choice in choices %}" + admin_filters.CHOICE + "{% endfor %}"
    assert ours.replace("admin_filters %}", "%}").replace("{% filter_choices choices %}", loop) == djangos
    choices = [
        {"selected": True, "query_string": "?a=<b>&c=ü d", "display": "x & 'y'"},
        {"selected": 0, "query_string": mark_safe("?q=&amp;"), "display": 1234567},
        {"selected": None, "query_string": "?", "display": None},
        {"selected": False, "query_string": "?t", "display": timezone.now()},
        {"selected": "", "query_string": "?lazy", "display": gettext_lazy("All")},
        {"selected": True, "query_string": "?called", "display": lambda: "<called>"},  # left to the loop
        {"query_string": "?missing"},  # left to the loop
    ]
    engine = engines["django"].engine
    context = {"title": "a & b", "choices": choices, "spec": None}
    assert engine.get_template("admin/kube_object_filter.html").render(Context(context)) == engine.get_template(
        "admin/filter.html"
    ).render(Context(context))


def test_the_results_template_is_djangos_with_its_rows_written_in_one_step():
    """Ours is Django's ``change_list_results.html`` but for the tag that stands for its loop over the
    rows; a row with a form (an editable list's, left to the loop's body) comes out as Django's."""
    djangos = (FILTER_TEMPLATES[0] / "change_list_results.html").read_text()
    ours = (FILTER_TEMPLATES[1] / "kube_object_change_list_results.html").read_text()
    loop = "{% for result in results %}" + admin_rows_tags.ROW + "{% endfor %}"
    assert ours.replace(" admin_rows %}", " %}").replace("{% result_table_rows results %}", loop) == djangos

    class Edited(forms.Form):
        def clean(self):
            raise forms.ValidationError("<refused> & why")

    edited = Edited(data={})
    edited.is_valid()
    results = [
        admin_list.ResultList(None, [mark_safe("<td>a</td>"), "<td>escaped & all</td>"]),
        admin_list.ResultList(edited, [mark_safe("<td>b</td>")]),
        admin_list.ResultList(Edited(), [mark_safe("<td>c</td>")]),  # unbound: no errors
        admin_list.ResultList(None, []),
    ]
    engine = engines["django"].engine
    context = {"results": results, "result_headers": [], "result_hidden_fields": []}
    written = engine.get_template("admin/kube_object_change_list_results.html").render(Context(context))
    assert written == engine.get_template("admin/change_list_results.html").render(Context(context))
    assert "&lt;refused&gt; &amp; why" in written


def test_a_timestamp_is_formatted_once_a_minute_only_where_the_format_shows_no_seconds(monkeypatch):
    minute = timezone.now().replace(second=0, microsecond=0)
    same_minute = (minute + datetime.timedelta(seconds=1), minute + datetime.timedelta(seconds=59))
    key_of = admin_rows._key_of(timestamps=True)
    assert key_of(same_minute[0]) == key_of(same_minute[1]) != key_of(minute + datetime.timedelta(minutes=1))
    monkeypatch.setattr(admin_rows, "get_format", lambda name: "N j, Y, H:i:s")
    key_of = admin_rows._key_of(timestamps=True)
    assert key_of(same_minute[0]) is key_of(same_minute[1]) is None
    assert key_of("text") == (str, "text") and key_of(1) != key_of(True)


def _plan_nodes(plan: dict) -> list[tuple[str, str]]:
    return [
        (plan["Node Type"], plan.get("Index Name", "")),
        *(n for child in plan.get("Plans", []) for n in _plan_nodes(child)),
    ]


@pytest.mark.django_db(transaction=True)  # VACUUM runs outside a transaction
@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's query plans")
def test_a_pool_filtered_page_in_cluster_order_reads_its_ids_from_the_index_alone(world, admin_browser):
    """At any depth, a pool-filtered page's ids (the cluster it lands in, from its offset, and the
    clusters after it) are stepped over in the pool's cluster-order index, never read from the
    table nor sorted (models_app migration 0013; 6-12 ms a page at 100,000 rows before)."""
    west = Cluster.objects.create(name="west", auth_method=Cluster.AuthMethod.SNAPSHOT)
    InferenceModel.objects.bulk_create(
        InferenceModel(
            cluster=cluster, namespace=f"team-{index % 3}", name=f"deep-{index:03d}", spec={}, node_pool="gpu-deep"
        )
        for cluster in (world.cluster, west)
        for index in range(70)
    )
    vacuum_analyze(InferenceModel._meta.db_table)  # an index-only read's visibility map
    for number in (1, 2):  # the first lands in one cluster and reads into the next; the second lands at 30
        with CaptureQueriesContext(connection) as captured:
            assert admin_browser.get(CHANGELIST, {"node_pool__exact": "gpu-deep", "p": number}).status_code == 200
        ids = [query["sql"] for query in captured.captured_queries if query["sql"].startswith(
            f'SELECT "{InferenceModel._meta.db_table}"."id" AS "pk"') and "LIMIT" in query["sql"]]  # fmt: skip
        assert len(ids) == (2 if number == 1 else 1)
        with transaction.atomic(), connection.cursor() as cursor:
            for method in ("seqscan", "bitmapscan", "sort"):  # what the indexes allow, which a few rows
                cursor.execute(f"SET LOCAL enable_{method} = off")  # here would not show
            for sql in ids:
                cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
                plan = cursor.fetchone()[0]
                nodes = _plan_nodes((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"])
                assert ("Index Only Scan", f"{InferenceModel._meta.db_table}_pool_cluster_order") in nodes, nodes
                assert not [node for node, _ in nodes if "Sort" in node], nodes


def test_a_sorted_changelist_pages_by_the_index_order(world, admin_browser):
    """Sorted by a column, the changelist breaks ties by namespace, name and id in the column's
    direction (the sort indexes' own order, so a page, the last too, is read from an index) and
    walks every row once over its pages (issue 41; every sort: tests/portal/test_admin_sorts.py)."""
    for index in range(120):
        _in_pool(world.cluster, ("vision", "nlp")[index % 2], f"sorted-{index:03d}", f"gpu-{index % 3}")
    columns = admin.site._registry[InferenceModel].get_list_display(None)
    memory = 1 + columns.index("memory_bytes_quantity")  # the selection checkbox is column 0
    pages = []
    for number in (1, 2):
        response = admin_browser.get(CHANGELIST, {"o": f"-{memory}", "p": number})
        assert response.context["cl"].queryset.query.order_by == ("-memory_bytes", "-namespace", "-name", "-id")
        pages.append([int(pk) for pk in ROW.findall(response.content.decode())])
    expected = InferenceModel.objects.order_by("-memory_bytes", "-namespace", "-name", "-id")
    assert [pk for page in pages for pk in page] == list(expected.values_list("pk", flat=True))
    assert f"o={memory}" in admin_browser.get(CHANGELIST).content.decode()


def test_every_mirrored_kinds_page_reads_only_its_rows_listed_columns(world, admin_browser, monkeypatch):
    """A changelist page's rows are read with the columns it shows (clusters.web.admin.listed_columns):
    no cell reads a column left out (which Django would load row by row, a query each), and the
    manifests (spec, status) are not read at all."""

    def refused(obj, fields=None, **kwargs):
        raise AssertionError(f"{type(obj).__name__} read {fields} row by row")

    kinds = [model for model, model_admin in admin.site._registry.items() if isinstance(model_admin, KubeObjectAdmin)]
    assert len(kinds) >= 5
    for model in kinds:
        path = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        with monkeypatch.context() as patched, CaptureQueriesContext(connection) as captured:
            patched.setattr(model, "refresh_from_db", refused)
            page = admin_browser.get(path).content.decode()
        assert page.count('class="action-select"') == model.objects.count() > 0, model
        table = model._meta.db_table
        read = [query["sql"] for query in captured.captured_queries if f'FROM "{table}"' in query["sql"]]
        assert any(f'"{table}"."name"' in sql for sql in read), (model, read)  # the rows were read here
        assert not [sql for sql in read for column in ("spec", "status") if f'"{table}"."{column}"' in sql], model


@pytest.mark.parametrize(
    "new_params, remove",
    [
        (None, None),
        ({"p": 3}, None),
        ({"o": "-2.1", "p": None}, ["p"]),
        ({"node_pool__exact": "gpu ü/&=+"}, ["node_pool"]),
        ({"namespace__in": ["a b", "c&d"], "q": ""}, None),
        ({"empty": []}, ["sync_state"]),
        ({"ready__exact": True, "node_pool__isnull": None}, ["node_pool__exact", "o"]),
    ],
)
def test_the_changelists_query_strings_are_djangos(world, new_params, remove):
    """Each parameter encoded once a page (NarrowChangeList.get_query_string) writes Django's text."""
    request = RequestFactory().get(CHANGELIST, {"node_pool__exact": "gpu a&b", "sync_state__exact": "Synced",
                                                "o": "3", "q": "ü"})  # fmt: skip
    request.user = User.objects.create_superuser("query-strings", email="", password=None)
    cl = admin.site._registry[InferenceModel].get_changelist_instance(request)
    assert isinstance(cl, NarrowChangeList)
    for _ in range(2):  # the second time from what the first kept
        assert cl.get_query_string(new_params, remove) == ChangeList.get_query_string(cl, new_params, remove)


@pytest.mark.parametrize("language", ["en", "de"])
def test_the_action_forms_widgets_are_djangos_kept_per_input(language):
    """The action form's widgets rendered once per distinct input (clusters.web.admin.RenderedOnce) write
    Django's HTML for each input: another choice set, selected value or language is another render."""
    choices = [("", "---------"), ("delete_selected", "Delete <selected> & 'all'"), ("resolve", gettext_lazy("Yes"))]
    grouped = [*choices, ("group", [("a", "A"), ("b", "B")])]  # an optgroup: rendered every time
    with translation.override(language):
        for data in (None, {"action": "resolve", "select_across": "1"}, {"action": "delete_selected"}):
            for offered in (choices, choices[:2], grouped):
                kept, djangos = KeptActionForm(data, auto_id=None), helpers.ActionForm(data, auto_id=None)
                for form in (kept, djangos):
                    form.fields["action"].choices = offered
                for _ in range(2):  # the second time from the memo
                    assert [str(field) for field in kept] == [str(field) for field in djangos]
