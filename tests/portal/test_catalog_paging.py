"""The catalog's pages at any depth: every row once, in a total order (ties and null keys included),
both ways, filters and sort kept in the page links, a cursor that is not one a clear 400, and a count
that says when it is an estimate."""

from __future__ import annotations

import base64
import html
import json
import re

import pytest

from clusters.web import list_costs
from models_app.models import InferenceModel, KubeAIModel, ModelService
from tests.accounts.conftest import sample_in, store

pytestmark = pytest.mark.django_db

ROW = re.compile(r'class="object-name"><a href="/models/([a-z-]+)/(\d+)/"')
NEXT = re.compile(r'<a href="\?([^"]*)">next →</a>')
PREVIOUS = re.compile(r'<a href="\?([^"]*)">← previous</a>')
KINDS = {"inferencemodels": InferenceModel, "kubeai-models": KubeAIModel, "modelservices": ModelService}


@pytest.fixture
def crowded(world):
    """60 more models of two kinds that tie on memory, namespace and name with each other (and a
    name repeated across namespaces): only the id and the kind tell them apart."""
    for index in range(30):
        for namespace in ("vision", "nlp"):
            store(world.cluster, sample_in("InferenceModel", namespace, name=f"tie-{index % 4}-{index:02d}"))
    for index in range(12):
        store(world.cluster, sample_in("Model", "vision", name=f"tie-{index % 4}-{index:02d}"))
    # null keys among the others, of both kinds: they sort together at one end
    InferenceModel.objects.filter(name__startswith="tie-1").update(memory_bytes=None, replicas=None)
    KubeAIModel.objects.filter(name__startswith="tie-2").update(memory_bytes=None)
    # status keys that tie and differ; pools longer than a B-tree entry holds (read apart, merged)
    InferenceModel.objects.filter(name__startswith="tie-3").update(
        utilization_percent=40, phase="Failed", gpu_count=2, running_replicas=0
    )
    InferenceModel.objects.filter(name__startswith="tie-0").update(utilization_percent=None, sync_state="conflict")
    for index, row in enumerate(InferenceModel.objects.filter(name__startswith="tie-2").order_by("id")):
        InferenceModel.objects.filter(pk=row.pk).update(node_pool=("gpu-" + "z" * 700)[: 600 + index * 20])
    return world


def _walk(browser, params: dict[str, str], link: re.Pattern) -> list[list[tuple[str, int]]]:
    """Every page from the one ``params`` names, following ``link`` (next or previous)."""
    pages, query = [], None
    while True:
        response = browser.get("/models/?" + query) if query else browser.get("/models/", params)
        assert response.status_code == 200
        body = response.content.decode()
        pages.append([(kind, int(pk)) for kind, pk in ROW.findall(body)])
        found = link.search(body)
        if not found:
            return pages
        query = html.unescape(found.group(1))
        for key, value in params.items() - {("cursor", params.get("cursor"))}:
            assert f"{key}={value}" in query, f"the page link drops {key}: {query}"


def _sort_key(row: tuple[str, int], column: str):
    if column == "utilization":  # InferenceModel's alone; the other kinds have none
        return getattr(KINDS[row[0]].objects.get(pk=row[1]), "utilization_percent", None)
    return getattr(KINDS[row[0]].objects.get(pk=row[1]), column)


ORDERINGS = ["name", "-name", "memory_bytes", "-memory_bytes", "namespace", "kind", "-replicas", "utilization",
             "-utilization", "cluster_name", "ready", "phase", "-gpu_count", "sync_state", "node_pool",
             "-node_pool", "running_replicas", "-running_replicas"]  # fmt: skip


@pytest.mark.parametrize("ordering", ORDERINGS)
def test_walking_the_pages_shows_every_row_once_in_order(crowded, ordering):
    browser = crowded.browser("staff")
    params = {"ordering": ordering}
    forward = _walk(browser, params, NEXT)
    rows = [row for page in forward for row in page]
    expected = {(slug, pk) for slug, model in KINDS.items() for pk in model.objects.values_list("pk", flat=True)}
    assert len(forward) > 2
    assert len(rows) == len(set(rows)) == len(expected) and set(rows) == expected
    column = ordering.lstrip("-")
    if column not in ("kind", "cluster_name"):  # not fields of any kind
        keys = [_sort_key(row, column) for row in rows]
        present = [key for key in keys if key is not None]
        assert present == sorted(present, reverse=ordering.startswith("-"))
        nulls = [index for index, key in enumerate(keys) if key is None]
        assert nulls == list(range(nulls[0], nulls[0] + len(nulls))) if nulls else True  # together
    assert _walk(browser, params, NEXT) == forward  # the same order every time: ties are broken for good
    backward = _walk(browser, {**params, "cursor": "last"}, PREVIOUS)
    assert [row for page in backward[::-1] for row in page] == rows
    assert all(len(page) == 25 for page in backward[:-1])


def test_a_cursor_that_is_not_one_is_a_clear_400(crowded):
    browser = crowded.browser("staff")
    first = browser.get("/models/", {"ordering": "name"}).content.decode()
    token = html.unescape(NEXT.search(first).group(1)).split("cursor=")[1]
    crafted = [  # well-formed JSON that is not a position: a number for the direction, a NUL in a name
        ["name", 1, "a", "vision", "a", 1, "inferencemodel"],
        ["name", "a", "a", "vision\u0000", "a", 1, "inferencemodel"],
        ["name", "a", ["a"], "vision", "a", 1, "inferencemodel"],
    ]
    tokens = [base64.urlsafe_b64encode(json.dumps(position).encode()).decode() for position in crafted]
    for params in ({"cursor": "not-a-cursor"}, {"cursor": token, "ordering": "-name"}, {"cursor": token[:-4]},
                   {"cursor": "W10"}, *({"cursor": other} for other in tokens)):  # fmt: skip
        response = browser.get("/models/", params)
        said = html.unescape(response.content.decode())
        assert response.status_code == 400 and "cursor:" in said and "is not a position in this list" in said


def test_filters_are_kept_across_pages(crowded):
    browser = crowded.browser("staff")
    params = {"namespace": "vision", "kind": "InferenceModel", "ordering": "-name"}
    pages = _walk(browser, params, NEXT)
    rows = [row for page in pages for row in page]
    assert len(pages) == 2 and all(slug == "inferencemodels" for slug, _ in rows)
    assert len(rows) == InferenceModel.objects.filter(namespace="vision").count()


def test_a_narrowed_count_beyond_the_bound_is_shown_as_an_estimate(crowded, monkeypatch):
    browser = crowded.browser("staff")
    exact = browser.get("/models/").content.decode()
    total = sum(model.objects.count() for model in KINDS.values())
    assert f"{total} models." in exact and "About" not in exact
    monkeypatch.setattr(list_costs, "COUNT_BOUND", 10)
    # nothing narrows the rows: counted from the kept totals, exact past the bound
    whole = html.unescape(browser.get("/models/").content.decode())
    assert f"{total} models." in whole and "About" not in whole
    # a filter narrows them: counted up to the bound, then estimated
    estimated = html.unescape(browser.get("/models/?sync_state=Synced").content.decode())
    assert "About " in estimated and "an estimate: more than 10 match" in estimated
    assert "last ⇥" in estimated


@pytest.mark.parametrize("ordering", ["-utilization", "node_pool", "phase"])
def test_a_team_member_walks_their_own_rows_in_order(crowded, ordering):
    """Sorted by a key read from another index (the narrow utilization table, the short pools'
    partial index), a member's pages hold exactly the rows of their team's namespaces, in order."""
    browser = crowded.browser("member")
    rows = [row for page in _walk(browser, {"ordering": ordering}, NEXT) for row in page]
    visible = {(slug, pk) for slug, model in KINDS.items()
               for pk in model.objects.filter(namespace="vision").values_list("pk", flat=True)}  # fmt: skip
    assert len(rows) == len(set(rows)) == len(visible) and set(rows) == visible
    keys = [_sort_key(row, ordering.lstrip("-")) for row in rows]
    present = [key for key in keys if key is not None]
    assert present == sorted(present, reverse=ordering.startswith("-"))


def test_the_replicas_shown_are_the_ones_the_cluster_reports(world):
    """A model scaled to zero shows 0 replicas, with its maximum apart (it showed ``maxReplicas``,
    1, as its replicas: issue 43), on the catalog and on its page; the column sorts by what runs."""
    manifest = sample_in("InferenceModel", "vision", name="asleep")
    manifest["spec"]["maxReplicas"] = 1  # the most the CRD allows
    asleep = store(world.cluster, manifest, status={"replicas": 0, "phase": "ScaledToZero"})
    manifest = sample_in("InferenceModel", "vision", name="awake")
    manifest["spec"]["maxReplicas"] = 1  # the most the CRD allows
    store(world.cluster, manifest, status={"replicas": 1})
    browser = world.browser("staff")
    body = browser.get("/models/", {"name": "asleep"}).content.decode()
    cell = re.search(rf"/models/inferencemodels/{asleep.pk}/.*?</tr>", body, re.S).group(0)
    assert "<td>0<br><small>max 1</small></td>" in cell, cell
    assert "ordering=running_replicas" in body  # the Replicas header sorts by what runs
    page = browser.get(f"/models/inferencemodels/{asleep.pk}/").content.decode()
    assert "replicas 0 running (1 max)" in page
    ordered = [row for page in _walk(browser, {"ordering": "-running_replicas"}, NEXT) for row in page]
    names = [InferenceModel.objects.get(pk=pk).name for slug, pk in ordered if slug == "inferencemodels"]
    assert names.index("awake") < names.index("asleep")


def test_the_admin_names_running_and_desired_replicas_apart(world):
    """The ModelService list shows what runs and what the spec asks as two named columns (a bare
    "Replicas" showed the spec's count, issue 43); the KubeAI list shows what runs."""
    browser = world.browser("staff")
    services = browser.get("/admin/models_app/modelservice/").content.decode()
    assert "Running replicas" in services and "Desired replicas" in services
    assert "Running replicas" in browser.get("/admin/models_app/kubeaimodel/").content.decode()
