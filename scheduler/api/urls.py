"""Planning API routes, mounted under /api/."""

from django.urls import path

from scheduler.api.views import CalculatorView, PlanView, PoolAccountsView

urlpatterns = [
    path("planning/plan/", PlanView.as_view(), name="planning-plan"),
    path("planning/calculator/", CalculatorView.as_view(), name="planning-calculator"),
    path("planning/pools/", PoolAccountsView.as_view(), name="planning-pools"),
]
