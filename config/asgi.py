"""ASGI entry point; traces when an OTLP endpoint is set (common.tracing, before the middleware
loads); the collector is tuned once the application is loaded (common.gc_tuning)."""

import os

from django.core.asgi import get_asgi_application

from common.gc_tuning import tune_after_startup
from common.tracing import configure_tracing

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
configure_tracing("inference-portal-web")
application = get_asgi_application()
tune_after_startup()
