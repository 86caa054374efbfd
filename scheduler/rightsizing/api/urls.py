"""REST API routes of right-sizing (under /api/)."""

from django.urls import path

from scheduler.rightsizing.api import views

urlpatterns = [
    path("rightsizing/preview/", views.PreviewView.as_view(), name="rightsizing-api-preview"),
    path("rightsizing/report/", views.ReportView.as_view(), name="rightsizing-api-report"),
    path("rightsizing/refresh/", views.RefreshView.as_view(), name="rightsizing-api-refresh"),
    path("rightsizing/models/<int:pk>/history/", views.HistoryView.as_view(), name="rightsizing-api-history"),
    path("rightsizing/models/<int:pk>/apply/", views.ApplyView.as_view(), name="rightsizing-api-apply"),
    path(
        "rightsizing/<slug:kind>/<int:pk>/history/", views.HistoryView.as_view(), name="rightsizing-api-object-history"
    ),
    path("rightsizing/<slug:kind>/<int:pk>/apply/", views.ApplyView.as_view(), name="rightsizing-api-object-apply"),
]
