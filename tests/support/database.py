"""One migrated PostgreSQL template per state of the migrations, which every test process's database
is copied from (``CREATE DATABASE ... TEMPLATE``, Django's ``TEST["TEMPLATE"]``).

Each process (each pytest-xdist worker) had its own database built by running every migration: 20 s
on a quiet 2-core host, over 50 s at load 18, three times at a parallel run's start. A copy takes
seconds, and Django's own ``migrate`` on the copy still runs (finding nothing to apply, it only
sends ``post_migrate``), so the tests start from what the migrations make, as before.

The template's name carries a digest of everything that decides what the migrations make: the
project's migration files and the pinned requirements (Django's and third-party apps' migrations).
Any change to them is a new template, built once by the first process that needs it while the others
wait on a PostgreSQL advisory lock (so concurrent runs on one server, CI beside a developer, build it
once); a build that fails leaves no template (it is built under another name and renamed when done).
What it leaves out: templates of earlier states stay on the server (a run on another branch may be
copying one); ``dropdb`` removes them (``test_portal_template_*``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
from django.apps import apps
from django.conf import settings

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_PREFIX = "test_portal_template_"
# pg_advisory_lock's key for building a template: any 64-bit number no other user of the server takes.
BUILD_LOCK = int.from_bytes(hashlib.sha256(b"inference-portal test template").digest()[:8], "big", signed=True)


def database_url(database: dict[str, Any], name: str) -> str:
    """A ``DATABASE_URL`` for database ``name`` on the server of ``database`` (a ``DATABASES`` entry)."""
    if database["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{name}"
    user, host, port = database.get("USER") or "postgres", database.get("HOST") or "127.0.0.1", database.get("PORT")
    password = f":{database['PASSWORD']}" if database.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{host}:{port or 5432}/{name}"


def migrations_digest() -> str:
    """A digest of what the migrated schema and rows depend on: the migration files of the project's
    apps (nested ones, such as scheduler.rightsizing, included) and the requirements files, which pin
    Django and the third-party apps whose migrations run too."""
    digest = hashlib.sha256()
    folders = [Path(config.path) / "migrations" for config in apps.get_app_configs()]
    files = [path for folder in folders if folder.is_relative_to(REPO_ROOT) for path in sorted(folder.glob("*.py"))]
    files += sorted(REPO_ROOT.glob("requirements*.txt"))
    for path in files:
        digest.update(str(path.relative_to(REPO_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def migrated_template() -> str | None:
    """The name of the template database for the current migrations, built when missing; None where
    the database is not PostgreSQL (SQLite's test database is a file migrated as before)."""
    database = settings.DATABASES["default"]
    if not database["ENGINE"].endswith("postgresql"):
        return None
    name = f"{TEMPLATE_PREFIX}{migrations_digest()}"
    login = {key.lower(): database.get(key) or None for key in ("USER", "PASSWORD", "HOST", "PORT")}
    with psycopg.connect(dbname="postgres", autocommit=True, **login) as server:
        server.execute("SELECT pg_advisory_lock(%s)", (BUILD_LOCK,))  # released when this connection closes
        if server.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            _build(server, database, name)
    return name


def _build(server: psycopg.Connection, database: dict[str, Any], name: str) -> None:
    """Migrate a new database as Django's test runner does (``migrate --run-syncdb``), in a process of
    its own, then give it the template's name: no process copies a half-migrated one."""
    building = f"{name}_building"
    server.execute(f'DROP DATABASE IF EXISTS "{building}"')  # a build killed half-way
    server.execute(f'CREATE DATABASE "{building}"')
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_XDIST")}
    environment |= {"DATABASE_URL": database_url(database, building), "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    done = subprocess.run([sys.executable, "manage.py", "migrate", "--run-syncdb", "--noinput", "-v", "0"],
                          cwd=REPO_ROOT, env=environment, capture_output=True, text=True)
    if done.returncode != 0:
        server.execute(f'DROP DATABASE IF EXISTS "{building}"')
        raise RuntimeError(f"migrating the template database failed:\n{done.stdout}{done.stderr}")
    server.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')


def vacuum_analyze(table: str, timeout: float = 60.0) -> None:
    """``VACUUM ANALYZE table`` once no other session of this database holds a snapshot. VACUUM
    marks a page all-visible (what an index-only scan needs to skip the table, and what makes the
    planner choose one) only when no open transaction may still not see its rows (a connection an
    earlier test of this process left busy, a server process still stopping, would hold it back)
    and their commits are on disk."""
    from django.db import connection

    from tests.clusters.conftest import wait_for

    def holders() -> list[tuple]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid, application_name, state, left(query, 100) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_xmin IS NOT NULL"
            )
            return cursor.fetchall()

    seen: list[list[tuple]] = []
    wait_for(lambda: not seen.append(holders()) and not seen[-1], timeout=timeout,
             message=f"no other session of the database to hold a snapshot (last: {seen[-1:] or 'none read'})")
    commits_on_disk()
    with connection.cursor() as cursor:
        cursor.execute(f'VACUUM ANALYZE "{table}"')


def commits_on_disk() -> None:
    """Every commit so far on disk. The test server commits asynchronously
    (.ci/start-services.sh), and VACUUM leaves a page not all-visible while a row's commit is not
    yet flushed (an index-only scan then reads the table): a synchronous commit flushes the log up
    to it, one that writes to the log (a transaction that wrote nothing commits without waiting,
    whatever synchronous_commit says). Outside a transaction (a test or benchmark's own, else it
    is not flushed until that ends)."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit = on")
        cursor.execute("CREATE TEMPORARY TABLE log_flushed_up_to_here ()")
        cursor.execute("DROP TABLE log_flushed_up_to_here")
