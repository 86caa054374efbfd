"""The portal's dashboard: clusters and their sync health, objects by kind and sync state, pool
usage, the largest right-sizing savings and recent runs, all within the user's teams' namespaces.

It composes every app, so it lives in ``config/`` (which depends on the apps), not in ``clusters/``
(which knows no concrete kind)."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.db.models import Count, Q
from django.utils.safestring import mark_safe
from django.views.generic import TemplateView

from accounts.access import VIEW, namespace_predicate, restrict, visible_cluster_ids, visible_clusters
from clusters.kinds import all_models
from clusters.models import SyncState
from models_app.models import InferenceModel
from runs_app.models import InferenceRun
from scheduler.accounting import HOLDERS_SHOWN, pool_accounts
from scheduler.charts import pool_usage_chart
from scheduler.rightsizing.conf import default_policy
from scheduler.rightsizing.report import build_report
from scheduler.visibility import team_accounts

RECENT = 8


class HomeView(LoginRequiredMixin, TemplateView):
    template_name = "home.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        user = self.request.user
        context = super().get_context_data(**kwargs)
        context["clusters"] = visible_clusters(user)
        states = [state for state, _ in SyncState.choices]
        kinds = []
        for model in all_models():
            counts = restrict(model.objects.all(), user, VIEW).aggregate(
                total=Count("id"), **{state: Count("id", filter=Q(sync_state=state)) for state in states}
            )
            cells = [(state, counts[state]) for state in states]
            kinds.append(
                {
                    "kind": model.kube.kind,
                    "api_version": model.kube.api_version,
                    "total": counts["total"],
                    "cells": cells,
                }
            )
        context["kinds"], context["states"] = kinds, states
        books = pool_accounts(
            restrict=partial(restrict, user=user, action=VIEW),
            per_pool=HOLDERS_SHOWN,
            visible=namespace_predicate(user),
        )
        accounts = team_accounts(books, namespace_predicate(user), visible_cluster_ids(user))
        # pygal escapes every label it draws; the SVG is ours, not user HTML.
        context["pool_chart"] = mark_safe(pool_usage_chart(accounts)) if accounts else ""
        context["accounts"] = accounts
        rows = build_report(
            default_policy(), ordering="-freed_bytes", models=restrict(InferenceModel.objects.all(), user)
        )
        context["savings"] = [row for row in rows if (row.freed_bytes or 0) > 0][:RECENT]
        runs = restrict(InferenceRun.objects.select_related("cluster"), user, VIEW).order_by("-created_at")
        context["runs"] = runs[:RECENT]
        return context
