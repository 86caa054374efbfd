"""The HTTP benchmark's requests all succeed against the deploy's server on a small bench dataset,
so ``make bench`` measures pages that answer 200 (a 403 or a form error would be timed as fast)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from bench import bench_http
from bench.dataset import build
from bench.http_server import production_server

PER_CLUSTER = 50


@pytest.mark.django_db(transaction=True)  # the server process reads committed rows
def test_every_benchmarked_request_answers_200_over_http() -> None:
    data = build(models_per_cluster=PER_CLUSTER, observations=2 * 10 * PER_CLUSTER, member_rows=10, analyze=False)
    cookies = bench_http.signed_in_cookies(User.objects.create_superuser("bench-http", email="", password=None))
    with production_server(bench_http.database_env()) as base:
        for stem, requests in bench_http.groups(data.counts["InferenceModel"]).items():
            figures = bench_http.measure(base, cookies, stem, requests, 0.1)  # raises on any status but 200
            assert figures[f"http.{stem}_rps"] > 0
