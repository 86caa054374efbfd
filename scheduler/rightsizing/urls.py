"""Right-sizing pages."""

from django.urls import path

from scheduler.rightsizing import views

urlpatterns = [
    path("rightsizing/", views.report_page, name="rightsizing-report"),
    path("rightsizing/export.csv", views.export, {"fmt": "csv"}, name="rightsizing-export-csv"),
    path("rightsizing/export.json", views.export, {"fmt": "json"}, name="rightsizing-export-json"),
    path("rightsizing/refresh/", views.refresh, name="rightsizing-refresh"),
    path("rightsizing/models/<int:pk>/", views.model_page, name="rightsizing-model"),
    path("rightsizing/<slug:kind>/<int:pk>/", views.model_page, name="rightsizing-object"),
    path("rightsizing/models/<int:pk>/apply/", views.apply, name="rightsizing-apply"),
    path("rightsizing/<slug:kind>/<int:pk>/apply/", views.apply, name="rightsizing-object-apply"),
]
