"""Routes of the fleet pages and of the dashboard, the portal's home page."""

from django.urls import path

from fleet import views
from fleet.dashboard import HomeView

urlpatterns = [
    path("", HomeView.as_view(), name="home"),
    path("fleet/pods/", views.pods_page, name="fleet-pods"),
    path("fleet/events/", views.events_page, name="fleet-events"),
    path("audit/", views.audit_page, name="audit-log"),
]
