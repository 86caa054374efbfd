"""Sign-in routes: the login page, and the API token a script obtains with a username and password.

Their own URL map (not ``accounts/urls.py``'s account pages) because they are mounted in two places:
``urlpatterns`` at the root, ``api_urlpatterns`` under /api/. config/urls.py mounts URL maps only,
never an app's views (docs/architecture.md).
"""

from django.urls import path

from accounts.api import ObtainTokenView
from accounts.views import PortalLoginView

urlpatterns = [
    path("login/", PortalLoginView.as_view(), name="login"),
]

api_urlpatterns = [
    path("token/", ObtainTokenView.as_view(), name="api-token"),
]
