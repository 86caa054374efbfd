"""Routes of the live views (clusters.web.live_views), for every mirrored kind by its model name."""

from django.urls import path

from clusters.web import live_views

urlpatterns = [
    path("live/<slug:model_name>/<int:pk>/", live_views.live_panel, name="live-objects"),
    path("live/<slug:model_name>/<int:pk>/logs/", live_views.live_logs, name="live-logs"),
]
