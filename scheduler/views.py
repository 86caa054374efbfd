"""Portal pages: planning (pool accounting, chart, what-if form); the calculator is scheduler/calculator/views.py."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import HttpRequest, HttpResponse
from django.views.generic import FormView

from accounts.public import (
    is_unrestricted,
    namespace_predicate,
    visible_cluster_ids,
    visible_clusters,
)
from scheduler.admission.quotas import quota_rows
from scheduler.forms import PlanForm, picked_models
from scheduler.planning.charts import placement_chart, pool_usage_chart, quota_chart
from scheduler.planning.pages import PAGE_LIMIT, Answer, first_page
from scheduler.planning.planner import plan, plan_to_dict
from scheduler.planning.visibility import hidden_proposals, redact_plan, visible_pool_accounts


class PlanningView(LoginRequiredMixin, FormView):
    template_name = "scheduler/planning.html"
    form_class = PlanForm

    def get_form_kwargs(self) -> dict[str, Any]:
        user = self.request.user
        return {**super().get_form_kwargs(), "visible": namespace_predicate(user), "clusters": visible_clusters(user)}

    def get_initial(self) -> dict[str, Any]:
        """The form's defaults: the first cluster the user sees (not looked up for a POST, whose
        bound form shows what was posted, never its initial cluster) and the picked models."""
        initial = super().get_initial()
        if self.request.method != "POST":
            first = visible_clusters(self.request.user).order_by("name").first()
            initial["cluster"] = first.name if first else None
        picked = picked_models(self.request.GET)
        if picked:
            initial["models"] = picked
        return initial

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """``?plan=1&pick=Kind:id...&cluster=``: the what-if chooser's "Plan these", planned at once."""
        if not (request.GET.get("plan") and request.GET.getlist("pick")):
            return super().get(request, *args, **kwargs)
        cluster = request.GET.get("cluster") or self.get_initial()["cluster"]
        data = {"cluster": cluster, "models": picked_models(request.GET), "include_running": "on"}
        form = self.form_class(**{**self.get_form_kwargs(), "data": data})
        return self.form_valid(form) if form.is_valid() else self.form_invalid(form)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The pools' accounts and the teams' quotas of every cluster the user sees, or, under a
        plan, of the planned cluster only (``planned``): the page answers a question about that
        cluster, and the others' holders were 10 times the work and the page for no answer."""
        planned = kwargs.pop("planned", None)
        context = super().get_context_data(**kwargs)
        user = self.request.user
        accounts = visible_pool_accounts(user, planned.pk if planned is not None else None)
        context["accounts"] = accounts
        context["chart"] = pool_usage_chart(accounts) if accounts else ""
        teams = None if is_unrestricted(user) else set(user.teams.values_list("pk", flat=True))
        # a planned cluster is one the user sees: the form offers no other
        clusters = {planned.pk} if planned is not None else visible_cluster_ids(user)
        context["quotas"] = quota_rows(clusters, teams)
        context["planned"] = planned
        context["quota_chart"] = quota_chart(context["quotas"]) if context["quotas"] else ""
        return context

    def form_valid(self, form: PlanForm) -> Any:
        shown = plan_for(form, self.request.user)
        if shown is None:
            return self.form_invalid(form)
        chart = placement_chart(shown)  # drawn from every model, before the lists are cut
        context = self.get_context_data(
            form=form, plan=first_page(shown, PAGE_LIMIT), placement_chart=chart, page_limit=PAGE_LIMIT,
            planned=form.cleaned_data["validated"]["cluster"],
        )
        return self.render_to_response(context)


def plan_for(form: PlanForm, user: Any) -> Answer | None:
    """The plan of a valid PlanForm as ``user`` may see it; None (errors added to the form) when
    it proposes models of namespaces the user may not see. The planning page and the guided
    deploy's what-if both ask this."""
    data = form.cleaned_data["validated"]
    visible = namespace_predicate(user)
    hidden = hidden_proposals(data["proposals"], data["models"], data["cluster"].name, visible)
    if hidden:
        for error in hidden:
            form.add_error(None, error.message)
        return None
    result = plan(data["cluster"], data["proposals"], data["include_running"], repack=data["repack"])
    proposed = {proposal.label for proposal in data["proposals"]}
    return redact_plan(plan_to_dict(result), data["cluster"].pk, visible, proposed)
