"""ASGI entry point; the collector is tuned once the application is loaded (config.gc_tuning)."""

import os

from django.core.asgi import get_asgi_application

from config.gc_tuning import tune_after_startup

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
application = get_asgi_application()
tune_after_startup()
