"""Governance API routes, mounted under /api/."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from governance.api.views import LimitViewSet, UsageView

router = SimpleRouter()
router.register("limits", LimitViewSet, basename="limit")
urlpatterns = [path("usage/", UsageView.as_view(), name="api-usage"), *router.urls]
