"""Benchmarks measure pages in a process set up as the web workers are.

``config/wsgi.py`` and ``config/asgi.py`` load the application's code and freeze what is alive
(:mod:`common.gc_tuning`) before the first request. A benchmark process that skips it makes every
full collection walk Django's few hundred thousand startup objects, a pause of about 150 ms that
no served request pays; measuring pages there would time the benchmark, not the portal.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from common.gc_tuning import load_application_code, tune_collector


@contextmanager
def collector_as_in_web_workers() -> Iterator[None]:
    """Tune the collector as the web entry points do; restore it afterwards for the next module."""
    defaults = gc.get_threshold()
    load_application_code()
    tune_collector()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*defaults)
