"""Portal pages of memory planning."""

from django.urls import path

from scheduler.views import CalculatorPageView, PlanningView

urlpatterns = [
    path("planning/", PlanningView.as_view(), name="planning"),
    path("calculator/", CalculatorPageView.as_view(), name="calculator"),
]
