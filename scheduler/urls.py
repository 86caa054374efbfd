"""Portal pages of memory planning."""

from django.urls import path

from scheduler.calculator.views import CalculatorPageView
from scheduler.views import PlanningView

urlpatterns = [
    path("planning/", PlanningView.as_view(), name="planning"),
    path("calculator/", CalculatorPageView.as_view(), name="calculator"),
]
