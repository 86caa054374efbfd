"""Planning API routes, mounted under /api/."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from scheduler.api.quota_views import TeamQuotaViewSet
from scheduler.api.views import PlanView, PoolAccountsView
from scheduler.calculator.api.views import CalculatorView, PresetsView

router = SimpleRouter()
router.register("planning/quotas", TeamQuotaViewSet, basename="planning-quotas")

urlpatterns = [
    path("planning/plan/", PlanView.as_view(), name="planning-plan"),
    path("planning/calculator/", CalculatorView.as_view(), name="planning-calculator"),
    path("planning/presets/", PresetsView.as_view(), name="planning-presets"),
    path("planning/pools/", PoolAccountsView.as_view(), name="planning-pools"),
    *router.urls,
]
