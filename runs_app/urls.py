"""Run and InferenceConfig pages (the API is in runs_app/api/)."""

from django.urls import path

from clusters.web.portal import DeleteObjectView, ResolveConflictView
from runs_app import config_views, views
from runs_app.models import InferenceConfig, InferenceRun

urlpatterns = [
    path("runs/", views.run_list, name="run-list"),
    path("runs/new/", views.submit_run, name="run-submit"),
    path("runs/<int:pk>/", views.run_page, name="run-page"),
    path("runs/<int:pk>/", views.run_page, name="inferencerun-detail-page"),  # the name web.portal.obj_url uses
    path("runs/<int:pk>/status/", views.run_status, name="run-status"),
    path("runs/<int:pk>/cancel/", views.cancel, name="run-cancel"),
    path("runs/<int:pk>/rerun/", views.rerun, name="run-rerun"),
    path("runs/<int:pk>/resolve/", ResolveConflictView.as_view(model=InferenceRun), name="inferencerun-resolve-page"),
    path(
        "runs/<int:pk>/delete/",
        DeleteObjectView.as_view(model=InferenceRun, list_url_name="run-list"),
        name="inferencerun-delete-page",
    ),
    path("configs/", config_views.config_list, name="config-list"),
    path("configs/new/", config_views.config_form, name="config-create"),
    path("configs/new/yaml/", config_views.config_yaml, name="config-create-yaml"),
    path("configs/<int:pk>/", config_views.config_page, name="inferenceconfig-detail-page"),
    path("configs/<int:pk>/edit/", config_views.config_form, name="config-edit"),
    path("configs/<int:pk>/yaml/", config_views.config_yaml, name="config-edit-yaml"),
    path(
        "configs/<int:pk>/resolve/",
        ResolveConflictView.as_view(model=InferenceConfig),
        name="inferenceconfig-resolve-page",
    ),
    path(
        "configs/<int:pk>/delete/",
        DeleteObjectView.as_view(model=InferenceConfig, list_url_name="config-list"),
        name="inferenceconfig-delete-page",
    ),
]
