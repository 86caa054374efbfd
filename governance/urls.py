"""Usage pages: the teams list and each team's usage, limits and budget."""

from django.urls import path

from governance import views

urlpatterns = [
    path("usage/", views.usage_index, name="usage-index"),
    path("teams/<slug:name>/usage/", views.team_usage, name="team-usage"),
    path("teams/<slug:name>/usage.csv", views.team_usage_csv, name="team-usage-csv"),
]
