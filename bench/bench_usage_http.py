"""Usage and showback over real HTTP at ``BENCH_USAGE_ROWS`` ledger rows (default 10,000,000: about
nine days at 12 requests/s), 16 concurrent clients, as staff and as a team member (issue 41).

The ledger is shaped as the reviewer's: 20 teams, 50 models, 28 days (the first 28 days of last
month), plus 403,200 GPU samples (50 models every 300 s). Raw rows are filled by PostgreSQL
itself (``INSERT ... SELECT`` over ``generate_series``, a million at a time), then the rollups by
the documented backfill (``governance.rollups.rebuild``, what ``manage.py backfill_usage_rollups``
runs): the same sums the gateway's writer adds batch by batch. ``http.usage_fill_s`` and
``http.usage_backfill_s`` time the two.

Each group is driven as bench/bench_http.py drives its pages (its server, its clients and its
``measure``, imported): ``http.usage_team_*`` the team page of one team for the month (staff),
``http.usage_api_*`` ``/api/usage/`` for the 28 days, every team and model (staff: every team's
rows and ``unused``), ``http.usage_api_day_*`` the same with ``group_by=day`` (one row per day,
team and model: 28,000 rows for staff, summed for ``totals``; the first page of them, 50 rows, is
written, as a client reads the list), ``http.usage_csv_*`` the team's CSV; ``http.member_*`` the
same as a member of that one team. p50/p99 from sending the request to the last byte, queueing
included; ``_server_cpu_ms`` / ``_db_cpu_ms`` the CPU each request cost the server and PostgreSQL.

Left out: the budget banner's Redis read (no budgets are set), TLS, a proxy, the browser's work;
the load generator shares the 2 cores with the server (``http.usage_load_1m_before`` / ``_after``).
Target (issue 41): every ``_p99_ms`` < 300.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, date, datetime, timedelta

from django.contrib.auth.models import User
from django.db import connection, transaction

from accounts.models import NamespaceGrant, Team
from bench.bench_http import SECONDS, database_env, measure, signed_in_cookies
from bench.http_server import production_server
from governance.models import GpuPrice, GpuSample, RequestRecord
from governance.partitions import ensure_partitions
from governance.rollups import rebuild

ROWS = int(os.environ.get("BENCH_USAGE_ROWS", "10000000"))
TEAMS, MODELS, DAYS = 20, 50, 28
SAMPLE_SECONDS = 300
CHUNK = 1_000_000


def first_day() -> date:
    """The first of last month: 28 days of it are always in the past, within one month."""
    return (datetime.now(UTC).date().replace(day=1) - timedelta(days=1)).replace(day=1)


def fill(start: datetime) -> None:
    """``ROWS`` ledger rows and the GPU samples, spread evenly over ``DAYS`` days from ``start``."""
    with connection.cursor() as cursor:
        ensure_partitions(cursor, [start, start + timedelta(days=DAYS)])
    span_seconds = DAYS * 86400
    ledger = RequestRecord._meta.db_table
    for low in range(1, ROWS + 1, CHUNK):
        high = min(ROWS, low + CHUNK - 1)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {ledger} (started_at, team, username, token_name, model, cluster_id, namespace, status, "
                f"latency_ms, first_byte_ms, prompt_tokens, completion_tokens, stream) "
                f"SELECT %s::timestamptz + make_interval(secs => g::float8 * %s / %s), "
                f"'team-' || lpad((g %% {TEAMS})::text, 2, '0'), 'bench', 'key', "
                f"'ns-' || ((g / {TEAMS}) %% {MODELS}) || '/model-' || ((g / {TEAMS}) %% {MODELS}), 1, "
                f"'ns-' || ((g / {TEAMS}) %% {MODELS}), 200, 5 + (g * 7919 %% 2000) / 4.0, 3, g %% 1000, "
                f"g %% 500, false FROM generate_series(%s::bigint, %s::bigint) g",
                [start, span_seconds, ROWS, low, high],
            )
    periods = span_seconds // SAMPLE_SECONDS
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {GpuSample._meta.db_table} (sampled_at, period_seconds, team, model, cluster_id, namespace, "
            f"node_pool, gpu_product, gpus, idle) "
            f"SELECT %s::timestamptz + make_interval(secs => p * {SAMPLE_SECONDS}), {SAMPLE_SECONDS}, "
            f"'team-' || lpad((m %% {TEAMS})::text, 2, '0'), 'ns-' || m || '/model-' || m, 1, 'ns-' || m, "
            f"'a100', 'NVIDIA-A100', 1 + m %% 3, p %% 12 = 0 "
            f"FROM generate_series(1, %s) p, generate_series(0, {MODELS - 1}) m",
            [start, periods],
        )


def run() -> dict[str, float]:
    figures = {"http.usage_load_1m_before": os.getloadavg()[0], "http.usage_ledger_rows": float(ROWS)}
    first = first_day()
    start = datetime.combine(first, datetime.min.time(), UTC)
    began = time.perf_counter()
    fill(start)
    figures["http.usage_fill_s"] = time.perf_counter() - began
    began = time.perf_counter()
    done = rebuild()
    figures["http.usage_backfill_s"] = time.perf_counter() - began
    assert done.ledger_rows == ROWS, done
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    GpuPrice.objects.create(gpu_product="NVIDIA-A100", price_per_gpu_hour="2.5")
    teams = [Team.objects.create(name=f"team-{index:02d}") for index in range(TEAMS)]
    for index in range(MODELS):
        NamespaceGrant.objects.create(team=teams[index % TEAMS], cluster=None, namespace=f"ns-{index}")
    member = User.objects.create_user("bench-usage-member")
    teams[0].members.add(member)
    staff = User.objects.create_superuser("bench-usage-staff", email="", password=None)
    last = first + timedelta(days=DAYS - 1)
    period = f"from={first}&to={last}"
    requests = {
        "usage_team": [("GET", f"/teams/team-00/usage/?month={first:%Y-%m}", None)],
        "usage_api": [("GET", f"/api/usage/?{period}", None)],
        "usage_api_day": [("GET", f"/api/usage/?{period}&group_by=day", None)],
        "usage_csv": [("GET", f"/teams/team-00/usage.csv?month={first:%Y-%m}", None)],
    }
    with production_server(database_env()) as server:
        for who, user in (("", staff), ("member_", member)):
            cookies = signed_in_cookies(user)
            for stem, group in requests.items():
                figures.update(measure(server, cookies, f"{who}{stem}", group, SECONDS))
    figures["http.usage_load_1m_after"] = os.getloadavg()[0]
    return figures
