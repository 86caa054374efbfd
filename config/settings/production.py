"""Production: secrets must come from the environment; secure cookies and HSTS on."""

from django.core.exceptions import ImproperlyConfigured

from config.settings.base import *  # noqa: F403
from config.settings.base import MIDDLEWARE, SALT_KEY, SECRET_KEY
from config.settings.env import env_bool, env_int

if SECRET_KEY.startswith("insecure-"):
    raise ImproperlyConfigured("SECRET_KEY must be set in the environment in production")
if any(key.startswith("insecure-") for key in SALT_KEY):
    raise ImproperlyConfigured(
        "FIELD_ENCRYPTION_KEYS must be set in the environment in production (credentials are encrypted with it)"
    )

# Never loopback backends in production, whatever the environment says (inference_gateway/placement.py).
GATEWAY_ALLOW_LOOPBACK = False

SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True

# Static files (the admin's) served by WhiteNoise from `collectstatic`'s output, so one web server
# image is enough; local runs use Django's own static view instead.
MIDDLEWARE = [*MIDDLEWARE]
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1, "whitenoise.middleware.WhiteNoiseMiddleware"
)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
