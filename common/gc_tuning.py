"""Garbage-collector setup for the long-lived processes: web workers (WSGI/ASGI) and Celery workers.

Why: CPython's cyclic collector now and then runs a *full* collection, which walks every container
object alive in the process. After startup that is mostly what never dies: Django, DRF, the
``kubernetes`` client, jsonschema and their modules, classes and caches, several hundred thousand
objects. A request decoding JSON columns allocates containers fast enough to trigger collections,
so once in a while one request pays a full walk: the API list's p99 was 185-209 ms with the
collector on and 11-15 ms with it off (``bench/bench_api.py``), at a median of ~14 ms.

What: after startup (the URLconf imported, so every view module and its imports are loaded),
``gc.freeze()`` moves every object alive into a permanent generation that collections skip: they
live as long as the process anyway. A full collection then walks only what requests left behind
(``bench/bench_api.py``: 154 ms of CPU per full collection before, under 0.1 ms after). The
collector stays on: reference cycles made by requests are still found and freed. With forking
servers (gunicorn ``--preload``, Celery prefork) freezing also keeps the shared pages shared, as
collections no longer write to those objects.

The thresholds stay CPython's (700, 10, 10), measured, not assumed: an API page leaves ~13,000
objects in reference cycles, and a young threshold of 50,000 made one request in four pay a 59 ms
young collection freeing 26,000 of them at once, where 700 spreads the same work over many
sub-millisecond collections.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any


def load_application_code() -> None:
    """Import what the first request would (the URLconf pulls in every view, serializer and form)."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 (the attribute access performs the imports)


def tune_collector() -> None:
    """Collect startup garbage once, then freeze what remains (see the module docstring)."""
    gc.collect()
    freeze_alive()


def freeze_alive() -> None:
    """Freeze what is alive now, without collecting first: for a large structure just built on a
    thread that must not pause (the gateway's catalog on its event loop), where the full collection
    would walk all of it to free only what was in cycles at that instant."""
    gc.freeze()


def tune_after_startup() -> None:
    """For web entry points: load the application's code, then tune the collector."""
    load_application_code()
    tune_collector()


_pauses = 0  # collector_paused blocks open now, in any thread
_resume = True  # whether the collector was on when the first of the open pauses began
_pauses_lock = threading.Lock()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector while thousands of containers are built and kept (a page of
    decoded objects, 100,000 planning rows): every few hundred allocations it would walk all live
    objects, mostly the ones just made, which measured 5x slower. They hold no cycles, so nothing
    is left for it to find; it resumes (and runs as usual) afterwards. The collector is the
    process's: threads pausing it at once (a resync encoding its next page while it decodes the one
    after) are counted, and the last to finish resumes it, unless it was off before the first."""
    global _pauses, _resume
    with _pauses_lock:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pauses_lock:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()


class CollectedBetweenRequests:
    """WSGI middleware: in a process that answers one request at a time (gunicorn's sync workers,
    the deploy's), the cyclic collector waits while a request is answered, then runs once.

    Why: a request builds what it answers (an API page: 50 model instances, their decoded JSON, the
    manifests made of them), and every 700 container allocations the collector walks what was made
    since, all of it still alive, and promotes it, so the next older generation's walks go over it
    again; what the request leaves in reference cycles (DRF's view, request and response refer to
    each other, and through them to the page) is only freed by such walks, after being walked a few
    times. That was 0.6 ms of the 7.0 ms of a worker's CPU an API list page cost (through Django's
    WSGI handler, in batches taking turns with and without the pause; the catalog's page 0.5 of
    11.4), in collections that found almost nothing. Paused, nothing is walked while the request runs, and the
    first allocation after it starts one young collection, which frees what the request left in
    cycles and walks nothing else of it.

    Where requests overlap (threaded servers, ``wsgi.multithread``) the collector is left alone: a
    pause per request would keep it off for as long as any request is in flight. A streaming or
    file answer resumes it as soon as the answer is handed to the server: it may be read for long.
    A whole answer is taken and closed (Django's ``request_finished``) before it is handed over, so
    the pause ends with this call whatever the server does; nginx in front takes it at once anyway.
    Memory: what a request leaves in cycles lives until its end, as the collector would have freed
    it only after a few hundred to thousands of allocations anyway; pages building hundreds of
    thousands of objects (the planner's) already run with the collector paused
    (:func:`collector_paused`, which leaves it paused when it finds it so).
    """

    def __init__(self, application: Callable[..., Iterable[bytes]]) -> None:
        self.application = application

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("wsgi.multithread", True) or not gc.isenabled():
            return self.application(environ, start_response)
        gc.disable()
        try:
            response = self.application(environ, start_response)
            if getattr(response, "streaming", True):  # streamed, a file, or not Django's: as it is
                return response
            # Whole already (Django's HttpResponse holds its bytes): taken and closed here, as the
            # server would once it has sent them, so the pause never outlives this call, whether or
            # not a server closes what it is given (test clients may not).
            body = list(response)
            response.close()
            del response
            return body
        finally:
            gc.enable()
