"""The calculator page: pick a preset (GET ?preset=...), adjust, calculate (POST)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.views.generic import FormView

from accounts.public import visible_cluster_ids
from scheduler.calculator.answer import answer
from scheduler.calculator.forms import CalculatorForm
from scheduler.calculator.presets import all_presets, preset


class CalculatorPageView(LoginRequiredMixin, FormView):
    template_name = "scheduler/calculator.html"
    form_class = CalculatorForm

    def get_initial(self) -> dict[str, Any]:
        chosen = preset(self.request.GET.get("preset", ""))
        return {**super().get_initial(), **(CalculatorForm.initial_for(chosen) if chosen else {})}

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "presets": all_presets()}

    def form_valid(self, form: CalculatorForm) -> Any:
        data = form.cleaned_data
        result = answer(data["estimate_kwargs"], data["chosen_preset"], visible_cluster_ids(self.request.user))
        return self.render_to_response(self.get_context_data(form=form, answer=result))
