"""Portal pages (filled in by the planning and right-sizing work)."""

from django.urls import path  # noqa: F401

urlpatterns: list = []
