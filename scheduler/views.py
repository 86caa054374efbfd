"""Portal pages: planning (pool accounting, chart, what-if form) and the memory calculator."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.utils.safestring import mark_safe
from django.views.generic import FormView

from clusters.models import Cluster
from scheduler.accounting import pool_accounts
from scheduler.calculator import estimate
from scheduler.charts import pool_usage_chart
from scheduler.forms import CalculatorForm, PlanForm
from scheduler.planner import plan, plan_to_dict


class PlanningView(LoginRequiredMixin, FormView):
    template_name = "scheduler/planning.html"
    form_class = PlanForm

    def get_initial(self) -> dict[str, Any]:
        first = Cluster.objects.order_by("name").first()
        return {**super().get_initial(), "cluster": first.name if first else None}

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        accounts = pool_accounts()
        context["accounts"] = accounts
        # pygal escapes every label it draws; the SVG is ours, not user HTML.
        context["chart"] = mark_safe(pool_usage_chart(accounts)) if accounts else ""
        return context

    def form_valid(self, form: PlanForm) -> Any:
        data = form.cleaned_data["validated"]
        result = plan(data["cluster"], data["proposals"], data["include_running"])
        return self.render_to_response(self.get_context_data(form=form, plan=plan_to_dict(result)))


class CalculatorPageView(LoginRequiredMixin, FormView):
    template_name = "scheduler/calculator.html"
    form_class = CalculatorForm

    def form_valid(self, form: CalculatorForm) -> Any:
        result = estimate(**form.cleaned_data["estimate_kwargs"])
        return self.render_to_response(self.get_context_data(form=form, estimate=result))
