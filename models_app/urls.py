"""Portal pages of the serving kinds (the API is in models_app/api/)."""

from django.urls import path

from clusters.web.portal import DeleteObjectView
from models_app import deploy, views, whatif

urlpatterns = [
    path("models/", views.catalog_page, name="catalog"),
    path("models/what-if/", whatif.whatif_chooser, name="whatif-chooser"),
    path("models/deploy/", deploy.deploy_page, name="model-deploy"),
    path("models/<slug:kind>/new/", views.model_form, name="model-create"),
    path("models/<slug:kind>/new/yaml/", views.model_yaml, name="model-create-yaml"),
    path("models/<slug:kind>/<int:pk>/edit/", views.model_form, name="model-edit"),
    path("models/<slug:kind>/<int:pk>/yaml/", views.model_yaml, name="model-edit-yaml"),
]
for slug, model in views.KINDS.items():
    name = model._meta.model_name
    urlpatterns += [
        path(f"models/{slug}/<int:pk>/", views.model_page, {"kind": slug}, name=f"{name}-detail-page"),
        path(f"models/{slug}/<int:pk>/resolve/", views.resolve_view(model), name=f"{name}-resolve-page"),
        path(
            f"models/{slug}/<int:pk>/delete/",
            DeleteObjectView.as_view(model=model, list_url_name="catalog"),
            name=f"{name}-delete-page",
        ),
    ]
