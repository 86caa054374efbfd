"""Pages and API lists at platform scale: 10 clusters x 10,000 InferenceModels and the rest.

Each page is requested through Django's test client, so the whole middleware stack (sessions,
authentication, CSRF, Prometheus, probes) runs as in production, for staff and for a team member
who sees about 1,000 InferenceModels. Each figure is the median of ``REPEATS`` requests after one
warm-up (a page slower than ``SLOW_S`` is measured once, so the module stays within its time
budget before the fixes: ``<figure>_repeats`` says how often, 0 for the warm-up alone). SQL
queries are counted on the warm-up request, as counting itself slows the database layer. The machine's 1-minute load is
recorded before and after (``pages.load_1m_before``/``_after``): other work on the machine shows
in every figure.
Pages are measured in a process whose collector is set up as the web workers' is
(:mod:`bench.web_worker`).

In process (``_inprocess_`` figures): Django's test client, one request at a time. Leaves out the
HTTP server (accept, parse, its workers' queueing under concurrent clients), the transfer and other
clients' load: bench/bench_http.py measures the same pages over HTTP with 16 clients.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from bench.dataset import Dataset, build
from bench.web_worker import collector_as_in_web_workers

REPEATS = 3
SLOW_S = 5.0
API_LIMIT = 50

# figure stem -> (URL, who); every stem becomes <stem>_inprocess_ms_100k and <stem>_queries_100k
PAGES: dict[str, tuple[str, str]] = {
    "pages.dashboard": ("/", "staff"),
    "pages.dashboard_member": ("/", "member"),
    "pages.catalog_first_page": ("/models/", "staff"),  # default order, page 1: bench_http has sorted and deep
    "pages.catalog_first_page_member": ("/models/", "member"),
    "pages.rightsizing": ("/rightsizing/", "staff"),
    "pages.rightsizing_member": ("/rightsizing/", "member"),
    # on this dataset of every kind; pages.planning_ms_100k (the slowest planning route) is bench_planning_pages's
    "pages.planning_all_kinds": ("/planning/", "staff"),
    "pages.planning_all_kinds_member": ("/planning/", "member"),
    "api.planning_pools_all_kinds": ("/api/planning/pools/", "staff"),
    "api.list_deep_offset": (f"/api/inferencemodels/?limit={API_LIMIT}&offset=90000&ordering=name", "staff"),
    "api.list_default_order_deep_offset": (f"/api/inferencemodels/?limit={API_LIMIT}&offset=90000", "staff"),
    "api.list_search": (f"/api/inferencemodels/?limit={API_LIMIT}&q=model-0421", "staff"),
    "api.list_member": (f"/api/inferencemodels/?limit={API_LIMIT}&offset=900&ordering=name", "member"),
    "api.runs_deep_offset": (f"/api/inferenceruns/?limit={API_LIMIT}&offset=9000&ordering=name", "staff"),
}


def _timed(request: Callable[[], object]) -> float:
    start = time.perf_counter()
    response = request()
    elapsed = (time.perf_counter() - start) * 1000
    assert response.status_code == 200, (response.status_code, response.content[:300])
    return elapsed


def measure(client: Client, url: str) -> tuple[float, int, int]:
    """(median ms, repetitions, SQL queries) of GET ``url``.

    The warm-up request (first-request imports, template compilation) is the one whose queries
    are counted, as counting slows the database layer. A warm-up slower than ``SLOW_S`` x 2 is
    the only sample (repetitions 0): repeating a page of a minute would not change the verdict.
    """
    with CaptureQueriesContext(connection) as queries:
        warm_up = _timed(lambda: client.get(url))
    count = len(queries)  # now: the next request's start clears the log this reads
    if warm_up > 2 * SLOW_S * 1000:
        return warm_up, 0, count
    samples = [_timed(lambda: client.get(url))]
    while len(samples) < REPEATS and samples[0] < SLOW_S * 1000:
        samples.append(_timed(lambda: client.get(url)))
    return statistics.median(samples), len(samples), count


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def run() -> dict[str, float]:
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    data: Dataset = build()
    figures: dict[str, float] = {
        "pages.dataset_build_s": time.perf_counter() - start,
        "pages.member_models": float(data.member_models),
    }
    clients = {"staff": _client(data.staff), "member": _client(data.member)}
    with collector_as_in_web_workers():
        for stem, (url, who) in PAGES.items():
            ms, repeats, queries = measure(clients[who], url)
            figures[f"{stem}_inprocess_ms_100k"] = ms
            figures[f"{stem}_repeats_100k"] = float(repeats)
            figures[f"{stem}_queries_100k"] = float(queries)
    figures["pages.load_1m_before"] = load_before
    figures["pages.load_1m_after"] = os.getloadavg()[0]
    return figures
