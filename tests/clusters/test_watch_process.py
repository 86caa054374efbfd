"""``manage.py sync_watch`` as a process: it follows the cluster, stops cleanly on SIGTERM, and only one
replica watches a cluster at a time (PostgreSQL advisory lock)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest
from django.db import connection

from clusters.watcher import advisory_lock_key, release_lead, try_lead
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest, wait_for
from tests.support.services import REPO_ROOT, session_database_url


def start_watcher(cluster_name: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DATABASE_URL": session_database_url(),
        "DEBUG": "false",
        "PYTHONUNBUFFERED": "1",
    }
    return subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "sync_watch",
            "--cluster",
            cluster_name,
            "--lead-retry",
            "0.5",
            "--watch-timeout",
            "2",
            "3",
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def read_until(process: subprocess.Popen, text: str, timeout: float = 20) -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    while text not in seen:
        if time.monotonic() > deadline or process.poll() is not None:
            raise AssertionError(f"no {text!r} from the watcher; it said:\n{seen}")
        seen += process.stdout.readline()
    return seen


def test_watcher_process_follows_the_cluster_and_stops_on_sigterm(live_cluster, kube) -> None:
    process = start_watcher(live_cluster.name)
    try:
        read_until(process, f"watching {live_cluster.name}")
        kube.write(sample_manifest("inferencemodel-mistral-7b.yaml", kube.namespace))
        wait_for(
            lambda: InferenceModel.objects.filter(name="mistral-7b").exists(),
            timeout=20,
            message="the watcher process to record the new object",
        )
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        assert "stopped" in process.stdout.read()
        assert time.monotonic() - started < 15
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.skipif(
    "os.environ.get('DATABASE_URL', '').startswith('sqlite') or not os.environ.get('DATABASE_URL')",
    reason="advisory locks need PostgreSQL (CI runs this there)",
)
def test_only_one_replica_leads_a_cluster(live_cluster) -> None:
    assert try_lead(live_cluster)
    settings = connection.settings_dict
    other = psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"] or 5432,
        user=settings["USER"] or "postgres",
        password=settings["PASSWORD"] or None,
        dbname=settings["NAME"],
        autocommit=True,
    )
    try:
        taken = other.execute("SELECT pg_try_advisory_lock(%s)", [advisory_lock_key(live_cluster)]).fetchone()[0]
        assert taken is False
        release_lead(live_cluster)
        taken = other.execute("SELECT pg_try_advisory_lock(%s)", [advisory_lock_key(live_cluster)]).fetchone()[0]
        assert taken is True
    finally:
        other.close()
