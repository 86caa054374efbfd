"""The catalog's pages at any depth: every row once, in a total order (ties included), both ways,
filters and sort kept in the page links, and a count that says when it is an estimate."""

from __future__ import annotations

import html
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
        for key, value in params.items() - {("page", params.get("page"))}:
            assert f"{key}={value}" in query, f"the page link drops {key}: {query}"


def _sort_key(row: tuple[str, int], column: str):
    return getattr(KINDS[row[0]].objects.get(pk=row[1]), column)


@pytest.mark.parametrize("ordering", ["name", "-name", "memory_bytes", "-memory_bytes", "namespace", "kind"])
def test_walking_the_pages_shows_every_row_once_in_order(crowded, ordering):
    browser = crowded.browser("staff")
    params = {"ordering": ordering}
    forward = _walk(browser, params, NEXT)
    rows = [row for page in forward for row in page]
    expected = {(slug, pk) for slug, model in KINDS.items() for pk in model.objects.values_list("pk", flat=True)}
    assert len(forward) > 2
    assert len(rows) == len(set(rows)) == len(expected) and set(rows) == expected
    column = ordering.lstrip("-")
    if column != "kind":
        keys = [_sort_key(row, column) for row in rows]
        assert keys == sorted(keys, reverse=ordering.startswith("-"))
    assert _walk(browser, params, NEXT) == forward  # the same order every time: ties are broken for good
    last = len(forward)
    backward = _walk(browser, {**params, "page": str(last)}, PREVIOUS)
    assert backward == forward[::-1]


def test_filters_are_kept_across_pages(crowded):
    browser = crowded.browser("staff")
    params = {"namespace": "vision", "kind": "InferenceModel", "ordering": "-name"}
    pages = _walk(browser, params, NEXT)
    rows = [row for page in pages for row in page]
    assert len(pages) == 2 and all(slug == "inferencemodels" for slug, _ in rows)
    assert len(rows) == InferenceModel.objects.filter(namespace="vision").count()


def test_a_count_beyond_the_bound_is_shown_as_an_estimate(crowded, monkeypatch):
    browser = crowded.browser("staff")
    exact = browser.get("/models/").content.decode()
    total = sum(model.objects.count() for model in KINDS.values())
    assert f"{total} models." in exact and "About" not in exact
    monkeypatch.setattr(list_costs, "COUNT_BOUND", 10)
    estimated = html.unescape(browser.get("/models/").content.decode())
    assert "About " in estimated and "an estimate: more than 10 match" in estimated
    assert "page 1 of about" in estimated
