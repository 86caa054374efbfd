"""URL map: portal pages, admin, REST API with its OpenAPI schema, Prometheus metrics.

It mounts each app's URL maps (``<app>.urls`` and the like) and nothing else of the apps: the
layer rule of docs/architecture.md, held by tests/test_architecture.py."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.permissions import IsAuthenticated

from accounts import sign_in_urls
from config.metrics_view import metrics

api_patterns = [
    path("", include("clusters.web.api.urls")),
    path("", include("models_app.api.urls")),
    path("", include("runs_app.api.urls")),
    path("", include("scheduler.api.urls")),
    path("", include("scheduler.rightsizing.api.urls")),
    path("", include("inference_gateway.api")),
    path("", include("governance.api.urls")),
    path("", include("gitops.api.urls")),
    path("", include(sign_in_urls.api_urlpatterns)),
    # anonymous users see nothing but the login page: the schema and its docs need a login too;
    # the docs are pages for people, so they send a logged-out visitor to the login page
    path("schema/", SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]), name="api-schema"),
    path(
        "docs/",
        login_required(SpectacularSwaggerView.as_view(url_name="api-schema", permission_classes=[IsAuthenticated])),
        name="api-docs",
    ),
    path(
        "redoc/",
        login_required(
            SpectacularRedocView.as_view(
                url_name="api-schema", permission_classes=[IsAuthenticated], template_name="api/redoc.html"
            )
        ),
        name="api-redoc",
    ),
]



def favicon(_request: HttpRequest) -> HttpResponsePermanentRedirect:
    """The portal's icon, for the pages that name none (the admin's, the API docs'): a browser asks
    for /favicon.ico on each, and a 404 was logged for every page (issue 43). Resolved per request:
    the static files' manifest names the file."""
    return HttpResponsePermanentRedirect(static("portal/favicon.svg"))


urlpatterns = [
    path("", include(sign_in_urls)),
    path("oidc/", include("mozilla_django_oidc.urls")),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("", include("accounts.urls")),
    path("", include("models_app.urls")),
    path("", include("runs_app.urls")),
    path("", include("clusters.web.live_urls")),
    path("", include("fleet.urls")),
    path("", include("scheduler.urls")),
    path("", include("scheduler.rightsizing.urls")),
    path("", include("governance.urls")),
    path("api/", include(api_patterns)),
    path("metrics", metrics, name="prometheus-django-metrics"),
    # what a browser asks for on pages that name no icon (the admin's, the API docs'): the portal's,
    # not a 404 logged on every page (issue 43)
    path("favicon.ico", favicon, name="favicon"),
]

# JSON under /api/, the portal's page elsewhere; named as Django names handlers (a dotted path), as
# config/ reaches the apps only through their URL maps and settings
handler404 = "clusters.web.api.exceptions.not_found"
