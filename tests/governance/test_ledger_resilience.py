"""A ledger no row can stop, and no row lost uncounted: values fitted to their columns, a row the
database refuses set aside while the rest of its batch lands, and the rows of a gateway killed
with -9 written by the next one from its spool. Real PostgreSQL, real gateway processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import orjson
import psycopg
import pytest
import requests
from django.conf import settings
from django.db import connection

from accounts.models import NamespaceGrant, Team
from governance.ledger import PostgresSink, clamp, conninfo_of
from governance.models import LedgerSpool, RequestRecord, SetAsideRecord
from governance.spool import Spool, spool_dir
from models_app.models import InferenceModel
from tests.clusters.conftest import wait_for
from tests.gateway.conftest import RunningGateway, metrics_text, serve_model
from tests.governance.conftest import metric_value
from tests.support.services import session_database_url

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif("connection.vendor != 'postgresql'", reason="COPY to PostgreSQL")]
AT = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)


def row(team: str, **values: object) -> tuple:
    base = {"started_at": AT, "team": team, "username": "u", "token_name": "k", "model": "m", "cluster_id": None,
            "namespace": "ns", "status": 200, "latency_ms": 1.0, "first_byte_ms": None, "prompt_tokens": 1,
            "completion_tokens": 2, "stream": False}
    return tuple({**base, **values}.values())


def test_values_the_columns_cannot_hold_are_fitted() -> None:
    fitted = clamp(row("t" * 100, model="m" * 300, prompt_tokens=3_000_000_000, status=70_000,
                       username="a\x00b", completion_tokens=-4))
    assert (len(fitted[1]), len(fitted[4]), fitted[2]) == (63, 253, "ab")
    assert (fitted[7], fitted[10], fitted[11]) == (32767, 2_147_483_647, 0)
    good = row("t")
    assert clamp(good) is good  # nothing to fit: the same tuple, nothing counted


def test_a_row_the_database_refuses_is_set_aside_and_the_rest_of_its_batch_written(admin_client) -> None:
    sink = PostgresSink(conninfo_of(connection.settings_dict))
    rows = [row(f"team-{index}") for index in range(40)]
    rows[13] = row("poison", status="not a status")  # refused even alone: not a number
    rows[29] = row("huge", prompt_tokens=3_000_000_000, model="m" * 300)  # fitted, written
    try:
        assert sink.write(rows, [("a.spool", 10 * (index + 1)) for index in range(40)]) == 40
    finally:
        sink.close()
    teams = set(RequestRecord.objects.values_list("team", flat=True))
    assert len(teams) == 39 and "poison" not in teams
    assert RequestRecord.objects.get(team="huge").prompt_tokens == 2_147_483_647
    aside = SetAsideRecord.objects.get()
    assert orjson.loads(aside.values)[1] == "poison" and "smallint" in aside.error
    assert LedgerSpool.objects.get(name="a.spool").written_bytes == 400  # the mark moved past every row
    page = admin_client.get("/admin/governance/setasiderecord/")  # staff see it, and why
    assert page.status_code == 200 and "poison" in page.content.decode() and "smallint" in page.content.decode()


def test_a_poison_row_through_the_gateway_stops_no_other_teams_rows(
    cluster, gateway, api_key, start_backend
) -> None:
    """The issue's case: a model whose gateway id is longer than the column, among other requests:
    every request lands (the long id cut to fit), none waits behind it, nothing is lost."""
    backend = start_backend("replica-a")
    # The longest id the name rule lets through: a 63-character namespace, an org and a name of 96
    # characters each (257 characters against the ledger's 253).
    namespace, long_name = "n" * 63, "o" * 96 + "/" + "m" * 96
    NamespaceGrant.objects.create(team=Team.objects.get(name="team-a"), cluster=None, namespace=namespace,
                                  access=NamespaceGrant.Access.VIEW)
    InferenceModel.objects.create(cluster=cluster, namespace=namespace, name="long-name", sync_state="Synced",
                                  spec={"modelName": long_name, "memory": "1Gi", "backendUrl": backend.url},
                                  status={"ready": True})
    serve_model(cluster, "plain", backend.url)
    before = metrics_text(gateway)
    headers = {"Authorization": f"Bearer {api_key}"}
    for index in range(30):
        model = f"{namespace}/{long_name}" if index % 10 == 0 else "plain"
        answer = requests.post(f"{gateway.url}/v1/chat/completions", headers=headers, timeout=30,
                               json={"model": model, "messages": [{"role": "user", "content": "a b"}]})
        assert answer.status_code == 200
    wait_for(lambda: RequestRecord.objects.count() == 30, message="all 30 rows written")
    assert RequestRecord.objects.filter(model=f"{namespace}/{long_name}"[:253]).count() == 3
    after = metrics_text(gateway)

    def grew(name: str) -> float:
        return metric_value(after, name) - metric_value(before, name)

    assert grew("inference_portal_usage_ledger_clamped_rows_total") == 3
    assert grew("inference_portal_usage_ledger_lost_rows_total") == 0
    assert metric_value(after, "inference_portal_usage_ledger_queued_rows") == 0


def test_the_rows_of_a_gateway_killed_with_9_are_written_by_the_next(
    cluster, api_key, start_backend, gateway_settings, tmp_path
) -> None:
    """A gateway process whose writer holds its rows (flushes an hour apart) answers 12 requests and
    is killed with -9 while a stream is in flight; the next gateway, with the same spool folder,
    writes the 12 rows once, counts them as recovered, and leaves no spool of the dead one."""
    backend = start_backend("replica-a", chunk_delay=0.5)
    serve_model(cluster, "steady", backend.url)
    port = subprocess.check_output([sys.executable, "-c", "from devstack.ports import free_port; print(free_port())"],
                                   cwd=settings.BASE_DIR, text=True).strip()
    env = {**os.environ, "DATABASE_URL": session_database_url(), "DEBUG": "false",
           "USAGE_LEDGER_SPOOL_DIR": str(tmp_path), "USAGE_LEDGER_FLUSH_SECONDS": "3600",
           "GOVERNANCE_REDIS_URL": settings.GOVERNANCE_REDIS_URL}
    process = subprocess.Popen([sys.executable, "manage.py", "gateway", "--host", "127.0.0.1", "--port", port,
                                "--workers", "1"], cwd=settings.BASE_DIR, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {api_key}"}
    try:
        wait_for(lambda: _healthy(url), timeout=120, message="the gateway process serving")
        for _ in range(12):
            answer = requests.post(f"{url}/v1/chat/completions", headers=headers, timeout=30,
                                   json={"model": "steady", "messages": [{"role": "user", "content": "hi"}]})
            assert answer.status_code == 200
        stream = requests.post(f"{url}/v1/chat/completions", headers=headers, timeout=30, stream=True,
                               json={"model": "steady", "stream": True,
                                     "messages": [{"role": "user", "content": "a b c d e f g h"}]})
        chunks = stream.iter_content(16)  # held: a dropped iterator closes the connection (a 499 row)
        next(chunks)  # mid-stream
        assert RequestRecord.objects.count() == 0  # held by the writer, an hour from its flush
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        stream.close()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
    folder = spool_dir(str(tmp_path), conninfo_of(connection.settings_dict))
    assert len(list(folder.glob("*.spool"))) == 1  # the dead process's, its 12 rows in it
    gateway_settings.USAGE_LEDGER_SPOOL_DIR = str(tmp_path)
    gateway_settings.USAGE_LEDGER_FLUSH_SECONDS = 0.02
    running = RunningGateway().start()
    try:
        wait_for(lambda: RequestRecord.objects.count() == 12, message="the dead gateway's 12 rows")
        text = metrics_text(running)
        assert metric_value(text, "inference_portal_usage_ledger_recovered_rows_total") >= 12
        assert [path.name for path in folder.glob("*.spool")] == [running_spool(folder)]
    finally:
        running.stop()
    assert RequestRecord.objects.count() == 12 and not LedgerSpool.objects.exists()
    assert list(folder.glob("*.spool")) == []  # stopped with everything written: its spool removed


def running_spool(folder: Path) -> str:
    """The one spool a live gateway holds in ``folder``."""
    (name,) = [path.name for path in folder.glob("*.spool")]
    return name


def _healthy(url: str) -> bool:
    try:
        return requests.get(f"{url}/healthz", timeout=5).status_code == 200
    except requests.ConnectionError:
        return False


def test_a_spool_is_replayed_exactly_once_from_its_mark(tmp_path) -> None:
    """A spool whose first rows were written (its mark says so) and whose last line was cut short
    by the death of its process: only the rows after the mark are written, the cut line counted lost."""
    import asyncio

    from governance.ledger import LedgerWriter

    sink = PostgresSink(conninfo_of(connection.settings_dict))
    dead = Spool(tmp_path)
    marks = [dead.append(row(f"team-{index}")) for index in range(6)]
    os.write(dead.fd, b'["2026-11-29T03:00:00+00:00", "cut')
    sink.write([row(f"team-{index}") for index in range(2)], [(dead.name, marks[1])] * 2)
    os.close(dead.fd)  # the process is gone: its lock with it
    writer = LedgerWriter(sink, 100, 10, 0.02, spool_folder=tmp_path)

    async def run() -> None:
        writer.start()
        with psycopg.connect(conninfo_of(connection.settings_dict), autocommit=True) as watching:
            async with asyncio.timeout(60):  # the spool's other 4 rows
                while watching.execute(f"SELECT count(*) FROM {RequestRecord._meta.db_table}").fetchone()[0] < 6:
                    await asyncio.sleep(0.02)
        await writer.stop()

    asyncio.run(run())
    assert sorted(RequestRecord.objects.values_list("team", flat=True)) == [f"team-{index}" for index in range(6)]
    assert writer.lost == 1 and list(tmp_path.glob("*.spool")) == []
