"""The HTTP benchmark's requests all succeed against the deploy's server on a small bench dataset,
so ``make bench`` measures pages that answer 200 (a 403 or a form error would be timed as fast)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection

from bench import bench_http
from bench.cpu_use import SYSTEM, CpuSpan, database_backends, process_tree
from bench.dataset import build
from bench.http_server import production_server
from models_app.models import InferenceModel
from tests.clusters.conftest import wait_for

PER_CLUSTER = 50


@pytest.mark.long
@pytest.mark.django_db(transaction=True)  # the server process reads committed rows
def test_every_benchmarked_request_answers_200_over_http() -> None:
    data = build(models_per_cluster=PER_CLUSTER, observations=2 * 10 * PER_CLUSTER, member_rows=10, analyze=False)
    staff = User.objects.create_superuser("bench-http", email="", password=None)
    cookies = bench_http.signed_in_cookies(staff)
    member = bench_http.signed_in_cookies(data.member)
    seen = InferenceModel.objects.filter(cluster=data.clusters[0], namespace__in=data.member_namespaces)
    every_filter = bench_http.admin_every_filter(staff)
    # every filter and every sortable column of each of the five kinds, first and last page
    assert {path.split("?")[0] for _, path, _ in every_filter} == {
        f"/admin/{m._meta.app_label}/{m._meta.model_name}/" for m in bench_http.ADMIN_KINDS
    }
    assert any("ready__exact=" in path for _, path, _ in every_filter)
    assert any("o=-" in path for _, path, _ in every_filter)
    with production_server(bench_http.database_env()) as server:
        for stem, requests in bench_http.groups(data.counts["InferenceModel"]).items():
            figures = bench_http.measure(server, cookies, stem, requests, 0.1)  # raises on any status but 200
            assert figures[f"http.{stem}_rps"] > 0
        member_groups = bench_http.groups(data.member_models, seen)
        assert set(member_groups) == {stem for stem in bench_http.groups(1) if not stem.startswith("admin_")}
        for stem, requests in member_groups.items():
            assert bench_http.measure(server, member, f"member_{stem}", requests, 0.1)[f"http.member_{stem}_rps"] > 0
        cookie = "; ".join(f"{name}={value}" for name, value in cookies.items())
        for _, path, _ in every_filter:  # each once: a 400, a redirect or a 500 of any of them fails here
            request = urllib.request.Request(server.url + path, headers={"Cookie": cookie})
            with urllib.request.urlopen(request) as answer:
                assert answer.status == 200 and answer.url == server.url + path, path
        pages = bench_http.groups(data.counts["InferenceModel"])[bench_http.PROBE_LOAD_GROUP]
        probes = bench_http.probes_under_load(server, cookies, pages, 0.5)
        assert probes["http.healthz_probes_under_load"] > 0 and probes["http.readyz_probes_under_load"] > 0


@pytest.mark.django_db
def test_the_cpu_of_the_server_and_of_the_database_is_found() -> None:
    """The CPU figures read the right processes: a server's workers below its first process, and the
    backends of the benchmark's database (this test's own connection among them)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
        assert backend in database_backends(settings.DATABASES["default"]["NAME"])
        assert backend not in database_backends("another-database")
        span = CpuSpan(lambda: database_backends(settings.DATABASES["default"]["NAME"]))
        span.start()
        cursor.execute("SELECT count(*) FROM generate_series(1, 3000000)")  # about 0.3 s of a backend's CPU
        assert span.stop() > 0
    burner = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.run([sys.executable, '-c', "
                               "'while True: pass'], timeout=30)"])  # fmt: skip
    try:
        assert wait_for(lambda: len(process_tree(burner.pid)) == 2)  # the child is found below its parent
        span = CpuSpan(lambda: process_tree(burner.pid))
        span.start()
        assert wait_for(lambda: span.stop() > 0.05)
    finally:
        for pid in reversed(process_tree(burner.pid)):
            os.kill(pid, signal.SIGKILL)
        burner.wait()


@pytest.mark.parametrize(("loop", "kernel_share"), [
    ("while True: pass", lambda system, spent: system < spent / 4),  # all in user space
    # the kernel makes the random bytes: nearly all of it is system time
    ("import os\nfd = os.open('/dev/urandom', os.O_RDONLY)\nwhile True: os.read(fd, 1 << 20)",
     lambda system, spent: system > spent / 2),
])  # fmt: skip
def test_the_system_part_of_the_cpu_is_the_kernels_work(loop: str, kernel_share) -> None:
    """The gateway benchmark's system CPU figures read the time the kernel spent on a process's behalf."""
    burner = subprocess.Popen([sys.executable, "-c", loop])
    try:
        spent, system = CpuSpan(lambda: [burner.pid]), CpuSpan(lambda: [burner.pid], (SYSTEM,))
        spent.start()
        system.start()
        assert wait_for(lambda: spent.stop() > 0.3)
        assert kernel_share(system.stop(), spent.stop())
    finally:
        burner.kill()
        burner.wait()
