"""Run pages (the API is in runs_app/api/)."""

from django.urls import path

from clusters.portal import ResolveConflictView
from runs_app import views
from runs_app.models import InferenceRun

urlpatterns = [
    path("runs/", views.run_list, name="run-list"),
    path("runs/new/", views.submit_run, name="run-submit"),
    path("runs/<int:pk>/", views.run_page, name="run-page"),
    path("runs/<int:pk>/", views.run_page, name="inferencerun-detail-page"),  # the name clusters.portal.obj_url uses
    path("runs/<int:pk>/status/", views.run_status, name="run-status"),
    path("runs/<int:pk>/resolve/", ResolveConflictView.as_view(model=InferenceRun), name="inferencerun-resolve-page"),
]
