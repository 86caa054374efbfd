"""The planning page's what-if chooser: models found by name and pool, ticked, then planned.

The planning page loads it as a fragment (htmx), so planning (scheduler/) does not depend on the
catalog; without JavaScript the chooser is a page of its own.

The search is the catalog's (models_app.catalog: the same filters and team restriction); what is
ticked travels as the catalog's ``pick=Kind:id`` parameters, which the planning page turns into
its YAML (scheduler.forms.picked_models), so the YAML box stays the advanced path for estimates
and edits.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render

from accounts.public import VIEW, restrict, visible_clusters
from models_app.catalog import FILTERSETS, catalog, filter_choices

SHOWN = 20  # search results listed; a longer list is narrowed by the search


def _picked(params: QueryDict, user: Any) -> list[dict[str, Any]]:
    """The ticked models the user may see, as catalog rows (kind, id, name, namespace, pool)."""
    rows = []
    for pick in dict.fromkeys(params.getlist("pick")):
        kind, _, number = pick.partition(":")
        if kind not in FILTERSETS or not number.isdigit():
            continue
        model = FILTERSETS[kind][0]
        found = restrict(model.objects.filter(pk=int(number)), user, VIEW).select_related("cluster").first()
        if found:
            rows.append({"kind": kind, "id": found.pk, "name": found.name, "namespace": found.namespace,
                         "cluster_name": found.cluster.name, "node_pool": found.node_pool,
                         "memory_bytes": found.memory_bytes, "gpu_count": found.gpu_count})  # fmt: skip
    return rows


def chooser(params: QueryDict, user: Any) -> dict[str, Any]:
    """What the chooser shows: the search, the matches not yet ticked, the ticked ones, the pools."""
    query, pool = params.get("q", "").strip(), params.get("node_pool", "").strip()
    picked = _picked(params, user)
    ticked = {(row["kind"], row["id"]) for row in picked}
    results: list[dict[str, Any]] = []
    if query or pool:
        search = {key: value for key, value in (("q", query), ("node_pool", pool)) if value}
        rows = catalog(search, user).page(None, SHOWN + len(ticked)).rows
        results = [row for row in rows if (row["kind"], row["id"]) not in ticked][:SHOWN]
    return {
        "whatif_query": query, "whatif_pool": pool, "whatif_pools": filter_choices(user)["pools"],
        "whatif_results": results, "whatif_picked": picked, "whatif_searched": bool(query or pool),
    }  # fmt: skip


@login_required
def whatif_chooser(request: HttpRequest) -> HttpResponse:
    """The chooser: a fragment for htmx (the planning page), a whole page otherwise."""
    fragment = request.headers.get("HX-Request") == "true"
    context = {**chooser(request.GET, request.user), "fragment": fragment,
               "clusters": visible_clusters(request.user).order_by("name").values_list("name", flat=True),
               "whatif_cluster": request.GET.get("cluster", "")}  # fmt: skip
    return render(request, "models_app/_whatif.html" if fragment else "models_app/whatif_page.html", context)
