"""Garbage-collector settings for the long-lived processes: web workers (WSGI/ASGI) and Celery workers.

Why: CPython's cyclic collector now and then runs a *full* collection, which walks every container
object alive in the process. After startup that is mostly what never dies: Django, DRF, the
``kubernetes`` client, jsonschema and their modules, classes and caches, several hundred thousand
objects. A request decoding JSON columns allocates containers fast enough to trigger collections,
so once in a while one request pays a full walk: the API list's p99 was 185-209 ms with the
collector on and 11-15 ms with it off (``bench/bench_api.py``), at a median of ~14 ms.

What: after startup (the URLconf imported, so every view module and its imports are loaded),
``gc.freeze()`` moves every object alive into a permanent generation that collections skip: they
live as long as the process anyway. The young-generation threshold is raised so a request that
builds a page of rows triggers few collections. The collector stays on: reference cycles made by
requests are still found and freed. With forking servers (gunicorn ``--preload``, Celery prefork)
freezing also keeps the shared pages shared, as collections no longer write to those objects.
"""

from __future__ import annotations

import gc

# Allocations minus deallocations of containers before a young collection (CPython's default: 700).
# A page of 1,000 rows with JSON columns allocates tens of thousands; 700 meant dozens of
# collections per request, each promoting survivors that the older generations walk again.
YOUNG_THRESHOLD = 50_000
# Young collections before a middle one, middle before a full one (CPython's defaults).
OLDER_THRESHOLDS = (10, 10)


def load_application_code() -> None:
    """Import what the first request would (the URLconf pulls in every view, serializer and form)."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 (the attribute access performs the imports)


def tune_collector() -> None:
    """Collect startup garbage once, freeze what remains, raise the young threshold (see module docstring)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)


def tune_after_startup() -> None:
    """For web entry points: load the application's code, then tune the collector."""
    load_application_code()
    tune_collector()
