"""The portal's dashboard: clusters and their sync health, objects by kind and sync state, pool
usage, the largest right-sizing savings and recent runs, all within the user's teams' namespaces.

It composes every app, so it lives in ``fleet/``, the overview across clusters at the top of the
apps' layers (docs/architecture.md): ``config/`` only mounts its URL, and ``clusters/`` knows no
concrete kind. Every figure is a SQL aggregate or a top-N query: the page costs
the same dozen queries at 100 or 100,000 models (tests/portal/test_query_counts.py)."""

from __future__ import annotations

from typing import Any, NamedTuple
from urllib.parse import urlencode

from django.contrib.auth.mixins import LoginRequiredMixin
from django.db.models import Count, Value
from django.urls import reverse
from django.views.generic import TemplateView

from accounts.public import VIEW, restrict, visible_clusters
from clusters.kinds import all_models
from clusters.models import KubeObject, SyncState
from runs_app.models import InferenceRun
from scheduler.public import USAGE_CLUSTER_COLUMNS, build_report, pool_usage_chart, pool_usage_of, rows_by_sync_state
from scheduler.rightsizing.models import Observation

RECENT = 8
CLUSTER_COLUMNS = ("name", "auth_method", "healthy", "last_full_resync_at", "last_error")  # home.html's clusters table
# its recent runs, as values (no JSON, no cluster, no model built: the template reads them by name)
RUN_COLUMNS = ("pk", "namespace", "name", "config_name", "phase", "created_at")
SAVING_COLUMNS = ("kind", "object_id", "namespace", "name", "node_pool", "declared_bytes", "recommended_bytes",
                  "freed_bytes")  # fmt: skip
# Where each kind is listed, with the filter that narrows that list to the kind: the serving kinds
# share the catalog; configs and runs have their own pages.
LIST_PAGES = {
    "InferenceModel": ("catalog", {"kind": "InferenceModel"}),
    "Model": ("catalog", {"kind": "Model"}),
    "ModelService": ("catalog", {"kind": "ModelService"}),
    "InferenceConfig": ("config-list", {}),
    "InferenceRun": ("run-list", {}),
}


def list_paths() -> dict[str, str]:
    """Each list page's path, reversed once a request (the dashboard links every kind in every sync
    state: a ``reverse()`` for each of the 35 links was 1.5 ms of its CPU)."""
    return {name: reverse(name) for name, _ in LIST_PAGES.values()}


def list_url(kind: str, paths: dict[str, str], **filters: str) -> str:
    """The list page of ``kind`` (its path from :func:`list_paths`) filtered by ``filters`` (e.g.
    ``sync_state``, ``cluster``)."""
    name, base = LIST_PAGES[kind]
    query = urlencode({**base, **filters})
    return f"{paths[name]}?{query}" if query else paths[name]


def visible_rows_by_sync_state(user: Any, models: list[type[KubeObject]]) -> list[dict[str, int]]:
    """The rows of each of ``models`` the user sees, by sync state, in two statements at most: the
    kept pool totals for the serving kinds the user sees every row of, and for the others a
    ``GROUP BY`` of the indexed sync_state (an index-only scan, not a pass over the JSON-laden
    rows) over the user's rows, every kind in one ``UNION ALL``."""
    visible = [restrict(model.objects.order_by(), user, VIEW) for model in models]
    kept = rows_by_sync_state([rows.model for rows in visible if not rows.query.where])
    grouped = [
        rows.annotate(of=Value(number)).values_list("of", "sync_state").annotate(rows=Count("*"))
        for number, rows in enumerate(visible)
        if rows.model not in kept
    ]
    counted: list[dict[str, int]] = [{} for _ in visible]
    for number, state, rows in grouped[0].union(*grouped[1:], all=True) if grouped else []:
        counted[number][state] = rows
    return [kept.get(rows.model, counted[number]) for number, rows in enumerate(visible)]


class Saving(NamedTuple):
    """One of the largest savings: the right-sizing report's row (``ReportRow``, which the
    ``history_url`` filter links by its kind and model id) with the table's columns only, read as
    values. The report's whole rows built an Observation, its Cluster (credentials decrypted) and a
    ReportRow of 27 fields for each of eight table rows: 1.9 ms, against 1.0."""

    kind: str
    model_id: int
    namespace: str
    name: str
    node_pool: str
    declared_bytes: int | None
    recommended_bytes: int | None
    freed_bytes: int | None


class HomeView(LoginRequiredMixin, TemplateView):
    template_name = "home.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        user = self.request.user
        context = super().get_context_data(**kwargs)
        # the table's columns and the pool totals' only: a whole row decrypts the cluster's
        # credentials and decodes its JSON. Read once for both.
        clusters = list(visible_clusters(user).only(*CLUSTER_COLUMNS, *USAGE_CLUSTER_COLUMNS))
        context["clusters"] = clusters
        states = [state for state, _ in SyncState.choices]
        kinds = []
        models = all_models()
        paths = list_paths()
        for model, by_state in zip(models, visible_rows_by_sync_state(user, models), strict=True):
            kind = model.kube.kind
            cells = [(state, by_state.get(state, 0), list_url(kind, paths, sync_state=state)) for state in states]
            kinds.append(
                {
                    "kind": kind,
                    "api_version": model.kube.api_version,
                    "total": sum(by_state.values()),
                    "url": list_url(kind, paths),
                    "cells": cells,
                }
            )
        context["kinds"], context["states"] = kinds, states
        # Totals only (no holder is shown here): the kept pool totals (scheduler.pool_totals), not a
        # sum over the models. A pool is shared by its cluster's teams: its totals stay whole for each.
        accounts = pool_usage_of(clusters)
        context["pool_chart"] = pool_usage_chart(accounts) if accounts else ""
        context["accounts"] = accounts
        # The top savings in SQL: the report's own rows (one definition of a saving), biggest first.
        largest = build_report(restrict(Observation.objects.all(), user), ordering="-freed_bytes")
        context["savings"] = [
            Saving(*row) for row in largest.filter(freed_bytes__gt=0).values_list(*SAVING_COLUMNS)[:RECENT]
        ]
        runs = restrict(InferenceRun.objects.order_by("-created_at"), user, VIEW)
        context["runs"] = runs.values(*RUN_COLUMNS)[:RECENT]
        return context
