"""WSGI entry point; traces when an OTLP endpoint is set (common.tracing, before the middleware
loads); the collector is tuned once the application is loaded, and in one-request-at-a-time
workers runs between requests (common.gc_tuning)."""

import os

from django.core.wsgi import get_wsgi_application

from common.gc_tuning import CollectedBetweenRequests, tune_after_startup
from common.tracing import configure_tracing

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
configure_tracing("inference-portal-web")
application = CollectedBetweenRequests(get_wsgi_application())
tune_after_startup()
