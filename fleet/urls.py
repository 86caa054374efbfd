"""Routes of the fleet pages."""

from django.urls import path

from fleet import views

urlpatterns = [
    path("fleet/pods/", views.pods_page, name="fleet-pods"),
    path("fleet/events/", views.events_page, name="fleet-events"),
    path("audit/", views.audit_page, name="audit-log"),
]
