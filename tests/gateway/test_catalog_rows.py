"""The route catalog's cost does not grow with the catalog: a change notice reads the row it names
and nothing else, a lost notices connection converges by comparing versions (ids and versions read,
then only the rows that differ), and a worker stops on SIGTERM within the grace period while a
request is in flight. Against real PostgreSQL notices, a real gateway and real backends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest
import requests
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster
from devstack.ports import free_port, wait_serving
from inference_gateway.catalog import apply, load_routes, read_rows, resync
from inference_gateway.server import SHUTDOWN_SECONDS
from inference_gateway.workers import STOP_SECONDS
from models_app.models import InferenceModel, KubeAIModel
from tests.clusters.conftest import wait_for
from tests.gateway.conftest import metrics_text, sample_value, serve_model
from tests.support.services import session_database_url

pytestmark = pytest.mark.django_db(transaction=True)
TABLE = InferenceModel._meta.db_table


def chat(url: str, key: str, model: str) -> requests.Response:
    return requests.post(f"{url}/v1/chat/completions", headers={"Authorization": f"Bearer {key}"},
                         json={"model": model, "messages": [{"role": "user", "content": "hi"}]}, timeout=60)


def rows_read(gateway, read: str) -> float:
    return sample_value(metrics_text(gateway), "inference_portal_gateway_catalog_rows_read_total", read=read)


@pytest.fixture
def no_ttl(gateway_settings):
    """Only notices (and a lost connection's comparison) refresh the catalog."""
    gateway_settings.GATEWAY_CATALOG_TTL_SECONDS = 3600
    return gateway_settings


def listening(gateway) -> bool:
    return requests.get(f"{gateway.url}/healthz", timeout=5).headers["X-Catalog-Notices"] == "listening"


def test_a_changed_row_is_read_alone_in_one_query(cluster) -> None:
    """The building blocks: a whole read, then a change read by id (one query) and applied in place;
    a row gone is dropped from the table."""
    keep = serve_model(cluster, "keep", "http://127.0.0.1:9001")
    moved = serve_model(cluster, "moved", "http://127.0.0.1:9002")
    KubeAIModel.objects.create(cluster=cluster, namespace="team-a", name="gemma", sync_state="Synced",
                               spec={"url": "hf://google/gemma-2-2b", "engine": "OLlama",
                                     "features": ["TextGeneration"], "resourceProfile": "cpu:1"})
    state = load_routes()
    assert sorted(state.table.by_id) == ["team-a/gemma", "team-a/keep", "team-a/moved"]
    assert state.table.by_id["team-a/gemma"][0].features == ("TextGeneration",)

    InferenceModel.objects.filter(pk=moved.pk).update(spec={**moved.spec, "backendUrl": "http://127.0.0.1:9003"})
    with CaptureQueriesContext(connection) as queries:
        changes = read_rows(state, {TABLE: {moved.pk}})
    assert len(queries) == 1, [query["sql"] for query in queries]
    assert list(changes) == [(TABLE, moved.pk)]
    apply(state, changes)
    assert state.table.by_id["team-a/moved"][0].port == 9003
    assert state.table.by_id["team-a/keep"][0].port == 9001  # untouched

    gone = keep.pk
    keep.delete()
    apply(state, read_rows(state, {TABLE: {gone}}))
    assert "team-a/keep" not in state.table.by_id and "keep" not in state.table.by_name


def test_comparing_versions_reads_only_the_rows_that_differ(cluster) -> None:
    """What a missed notice costs: ids and versions of every row, then only the changed, new and gone rows."""
    models = [serve_model(cluster, f"m{index}", f"http://127.0.0.1:{9000 + index}") for index in range(20)]
    state = load_routes()
    assert resync(state) == {}  # nothing changed: no row read

    InferenceModel.objects.filter(pk=models[3].pk).update(ready=False)
    gone = models[5].pk
    models[5].delete()
    added = serve_model(cluster, "added", "http://127.0.0.1:9100")
    changes = resync(state)
    assert set(changes) == {(TABLE, models[3].pk), (TABLE, gone), (TABLE, added.pk)}
    apply(state, changes)
    assert state.table.by_id["team-a/m3"][0].ready is False
    assert "team-a/m5" not in state.table.by_id
    assert state.table.by_id["team-a/added"][0].port == 9100
    assert resync(state) == {}


def test_a_changed_row_routes_at_once_reading_that_row_alone(
        cluster, no_ttl, gateway, api_key, start_backend) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("catalog notices are PostgreSQL's LISTEN/NOTIFY")
    old, new = start_backend("old"), start_backend("new")
    for index in range(30):
        serve_model(cluster, f"other-{index}", old.url)
    model = serve_model(cluster, "llama", old.url)
    wait_for(lambda: listening(gateway), timeout=30, message="the gateway to listen for catalog notices")
    assert chat(gateway.url, api_key, "llama").headers["X-Backend"] == "old"
    whole, notice = rows_read(gateway, "whole"), rows_read(gateway, "notice")

    InferenceModel.objects.filter(pk=model.pk).update(spec={**model.spec, "backendUrl": new.url})
    # the notice lands within milliseconds of the commit, not before the commit returns
    wait_for(lambda: chat(gateway.url, api_key, "llama").headers["X-Backend"] == "new", timeout=30,
             message="the change to route once its notice is in")
    assert rows_read(gateway, "whole") == whole  # no whole read
    assert rows_read(gateway, "notice") == notice + 1  # that row alone


def test_a_lost_notices_connection_converges(cluster, no_ttl, gateway, api_key, start_backend) -> None:
    """The listener's connection is killed and a row changes while it is down: once it is back the
    catalog compares versions and routes the change, without a whole read."""
    if connection.vendor != "postgresql":
        pytest.skip("catalog notices are PostgreSQL's LISTEN/NOTIFY")
    old, new = start_backend("old"), start_backend("new")
    model = serve_model(cluster, "llama", old.url)
    wait_for(lambda: listening(gateway), timeout=30, message="the gateway to listen for catalog notices")
    assert chat(gateway.url, api_key, "llama").headers["X-Backend"] == "old"
    whole, compared = rows_read(gateway, "whole"), rows_read(gateway, "compare")

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND application_name = 'inference-gateway-notices'")
        assert cursor.fetchone() == (True,)
    InferenceModel.objects.filter(pk=model.pk).update(spec={**model.spec, "backendUrl": new.url})

    wait_for(lambda: chat(gateway.url, api_key, "llama").headers["X-Backend"] == "new", timeout=30,
             message="the change made while not listening to route")
    assert rows_read(gateway, "whole") == whole
    assert rows_read(gateway, "compare") >= compared + 1


def test_sigterm_stops_a_worker_within_the_grace_period_with_a_request_in_flight(
        transactional_db, api_key, start_backend) -> None:
    """``manage.py gateway --workers 1`` (one worker, as a Pod's container runs it) takes SIGTERM
    while a request waits on a slow backend: the request is answered and the process has exited
    well inside the supervisor's (and Kubernetes' default) grace period."""
    assert SHUTDOWN_SECONDS < STOP_SECONDS
    cluster = Cluster.objects.create(name="snapshot", auth_method=Cluster.AuthMethod.SNAPSHOT)
    slow = start_backend("slow", think=3.0)
    serve_model(cluster, "llama", slow.url)
    port = free_port()
    env = {**os.environ, "DATABASE_URL": session_database_url(), "DEBUG": "false"}
    process = subprocess.Popen(
        [sys.executable, "manage.py", "gateway", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        cwd=settings.BASE_DIR, env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_serving(f"{url}/healthz", "manage.py gateway --workers 1", process=process)
        answers: list[requests.Response] = []
        sender = threading.Thread(target=lambda: answers.append(chat(url, api_key, "llama")))
        sender.start()
        wait_for(lambda: slow.stats().get("/v1/chat/completions", 0) >= 1, timeout=30,
                 message="the request to reach the slow backend")
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=STOP_SECONDS)  # the grace period: past it, the supervisor would kill it
        sender.join(timeout=30)
        assert answers and answers[0].status_code == 200, answers
        assert process.returncode == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
