"""Pages and API lists as users feel them: over real HTTP, 16 concurrent clients, against the deploy's
own server command (bench/http_server.py: ``config/web_server.py``, production settings) on the bench
dataset (bench/dataset.py, 10 clusters x ``BENCH_HTTP_MODELS_PER_CLUSTER`` InferenceModels, 10,000
by default: 100,000 rows).

Each group below is driven for ``BENCH_HTTP_SECONDS`` (after a warm-up round) by ``CLIENTS``
aiohttp clients on keep-alive connections, each sending its next request as soon as the last is
read; a group of several URLs (every sortable column, ascending and descending) is cycled through
by every client. ``http.<group>_p50_ms`` / ``_p99_ms`` are latencies from sending the request to the
last byte of the response, queueing in the server included; ``http.<group>_rps`` the throughput.
``http.api_list_*``: the API's list by name, first page and the pages 50% and 90% down as its
next links reach them (a keyset cursor); ``http.api_list_offset_*`` the same pages by ``offset=``.
``http.audit_*``: the audit log's first and a deep page, over one audit entry per InferenceModel
(bench/audit_data.py).

``http.<group>_server_cpu_ms`` / ``_db_cpu_ms`` / ``_client_cpu_ms``: CPU a request cost the server's
processes (its master and workers), PostgreSQL's backends serving the benchmark's database and this
process (the load generator), over the timed requests (bench/cpu_use.py, from /proc; the requests
in flight at the end are spent on but not counted, at most one per client). On 2 cores the latency
follows from them: 16 clients wait about 16 x (their sum) / 2. Left out: PostgreSQL's background
work (WAL writer, autovacuum) and the kernel's network work not charged to these processes.

Included: the server's accept and parse, every middleware (sessions, CSRF, authentication,
Prometheus), the view, its SQL on PostgreSQL, template rendering and the transfer over loopback.
Left out: TLS, a proxy or ingress in front, the network between a user and the cluster, the
browser's own work (assets, JavaScript, layout). The load generator runs in this process, on the
same 2 cores as the server: its CPU is taken from the server's, as is every other process's on a
shared machine (``http.load_1m_before`` / ``_after`` record the machine's load).

``http.healthz_p50_ms_under_load`` / ``_p99_ms_under_load`` and ``http.readyz_*_under_load``: the
probes as the kubelet sends them (a new connection each, one every ``PROBE_PAUSE_S`` after the last
answer), timed while ``CLIENTS`` clients keep every page worker busy on the sorted catalog
(``http.probes_load_pages_p99_ms`` the pages' own p99 meanwhile). nginx answers /healthz itself and
a worker of its own answers /readyz (docs/deploy.md "Probes"); through the page workers the liveness
probe took 2.8-4.7 s here, against the kubelet's 5 s timeout (issue 41). Target: healthz p99 < 100.

``http.member_<group>_*``: every group but the admin's (staff's only: a member is sent to sign in)
as a team member (bench/dataset.py: grants on ten namespaces of one cluster, 1,000 of the 100,000
InferenceModels), with the deep pages 90% down the member's own rows: what a team sees beside what
staff see, on the same server (issue 41: members paid 1.4-4.8x staff's CPU and nothing measured it).

``http.fleet_all_clusters_*``: the fleet's pods and events pages (``/fleet/pods/``,
``/fleet/events/``) over the ten clusters, nine pointed at the real control plane (the tests',
devstack/control_plane.py, 20 pods of a Deployment in team-00) under their own names and one at an
address that accepts and never answers (tests/support/silent_server.py, request timeout 10 s);
``http.member_fleet_all_clusters_*`` the member's (ten namespaces of one reachable cluster). Left
out: the network to a remote API server; the control plane runs on the same 2 cores. Target: p99 <
1,000 ms. Skipped (no figure) where the control plane cannot run (no Go toolchain).

``http.admin_changelist_every_filter_*``: every list filter (one value each) and every sortable
column (``get_sortable_by``, ascending and descending) of the mirrored kinds' admin changelists, each on its first and
its last page, at 100,000 rows (bench ``admin_every_filter``: the URLs cycled). Target: p99 < 500.
With ``BENCH_HTTP_ADMIN_ONLY=1`` only the admin's groups (``http.admin_changelist_*``) are measured,
on the same dataset and server: for work on the admin's pages, where the whole run is too long on a
busy machine. Left out then: every other group, the member's, the server models, the probes and the
fleet (their keys in bench/results.json are left as they were).

``http.healthz_under_slowloris_ok`` is 1 when /healthz answered every probe while 40 slow-header
connections were held open (bench/slow_clients.py), else 0. ``http.server_<model>_catalog_first_*``
compare server models on the same machine, one after the other on the catalog's first page
(nginx_gunicorn: the deploy's, config/web_server.py, nginx in front of 5 sync workers; granian: the former
deploy, 3 workers x 8 threads; gunicorn_gthread: 3 workers x 8 threads; bench/http_server.py ALTERNATIVES).
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from urllib.parse import urlencode

import aiohttp
import kubernetes
from django.conf import settings
from django.contrib import admin as django_admin
from django.contrib.auth.models import User
from django.core.exceptions import FieldDoesNotExist
from django.db.models import QuerySet
from django.test import Client, RequestFactory, override_settings

from bench.audit_data import add_audit_entries
from bench.cpu_use import CpuSpan, database_backends, process_tree
from bench.dataset import POOLS, build
from bench.http_server import ALTERNATIVES, Server, production_server
from bench.http_server import SECRET_KEY as SERVER_SECRET_KEY
from bench.slow_clients import healthz_answers_under_slow_clients
from clusters.models import Cluster
from clusters.web.api.pagination import Keyset
from devstack.control_plane import (
    ADMIN_TOKEN,
    ControlPlane,
    ControlPlaneUnavailable,
    apply_crds_to,
    running_control_plane,
)
from models_app.catalog import SORTABLE, cursor_token
from models_app.models import InferenceModel, KubeAIModel, ModelService
from runs_app.models import InferenceConfig, InferenceRun
from tests.support.silent_server import SilentServer

CLIENTS = 16
SECONDS = float(os.environ.get("BENCH_HTTP_SECONDS", "5"))
ADMIN_ONLY = os.environ.get("BENCH_HTTP_ADMIN_ONLY") == "1"  # only http.admin_changelist_* (module docstring)
MODELS_PER_CLUSTER = int(os.environ.get("BENCH_HTTP_MODELS_PER_CLUSTER", "10000"))
CATALOG_PAGE_SIZE = 25
ADMIN_PAGE_SIZE = 100
API_LIMIT = 50
CSRF = "b" * 32  # an unmasked secret: the cookie and the header carry the same one
SLOWLORIS_CONNECTIONS = 40
ESTIMATE = {"name": "new-70b", "namespace": "team-0", "pool": "gpu-a100", "memory": "160Gi", "gpus": 2,
            "gpu_memory": "140Gi"}  # fmt: skip
WHATIF = "- estimate: {name: new-70b, namespace: team-0, pool: gpu-a100, memory: 160Gi, gpus: 2, gpu_memory: 140Gi}"
PLAN = {"cluster": "cluster-00", "models": [{"estimate": ESTIMATE}]}


def deep_cursor(ordering: str, rows: int, seen: QuerySet | None = None) -> str:
    """The catalog's ``cursor`` of the page 90% of the way down ``ordering`` (the dataset's rows
    are all InferenceModels; ``seen``: those a member sees), as a user reaches it by following
    next links (or last and previous)."""
    key = ordering.lstrip("-")
    terms = [f"{'-' if ordering.startswith('-') else ''}{term}" for term in (key, "namespace", "name", "id")]
    seen = InferenceModel.objects.all() if seen is None else seen
    row = seen.order_by(*terms).values(key, "namespace", "name", "id")[int(rows * 0.9)]
    return cursor_token(ordering, {**row, "page": InferenceModel._meta.model_name})


def api_cursor(rows: int, at: float, seen: QuerySet | None = None) -> str:
    """``&cursor=`` of the API's page ``at`` (a fraction) of the way down ``ordering=name``, as a client
    reaches it by following next links; nothing for the first page."""
    if not at:
        return ""
    keyset = Keyset(InferenceModel, ("name", "namespace", "pk"))
    seen = InferenceModel.objects.all() if seen is None else seen
    return f"&cursor={keyset.token(seen.order_by(*keyset.terms)[int(rows * at)], before=False)}"


def groups(rows: int, seen: QuerySet | None = None) -> dict[str, list[tuple[str, str, object]]]:
    """Figure stem -> requests (method, path, body) its clients cycle through; with ``seen`` (the
    ``rows`` InferenceModels a member sees), a member's: no admin pages, deep pages in their rows."""
    deep_catalog = int(rows * 0.9) // CATALOG_PAGE_SIZE
    # a proposal's namespace: one the user may read (a member's first, which cluster-00 holds)
    namespace = "team-0" if seen is None else seen.order_by("namespace").values_list("namespace", flat=True)[0]
    per_pool = rows // len(POOLS)
    deep_admin = max(1, int(per_pool * 0.9) // ADMIN_PAGE_SIZE)
    admin = "/admin/models_app/inferencemodel/"
    found = {
        "catalog_first": [("GET", "/models/", None)],
        "catalog_sorted": [("GET", f"/models/?ordering={sign}{key}", None) for key in SORTABLE for sign in ("", "-")],
        "catalog_deep": [("GET", f"/models/?cursor={deep_cursor('name', rows, seen)}", None),
                         ("GET", f"/models/?ordering=-memory_bytes&cursor={deep_cursor('-memory_bytes', rows, seen)}",
                          None)],
        "admin_changelist_first": [("GET", f"{admin}?node_pool__exact={pool}", None) for pool in POOLS],
        "admin_changelist_deep": [("GET", f"{admin}?node_pool__exact={pool}&p={deep_admin}", None) for pool in POOLS],
        "whatif_post": [("POST", "/planning/", {"cluster": "cluster-00", "models": WHATIF.replace("team-0", namespace),
                                                "include_running": "on"})],
        "plan_api": [("POST", "/api/planning/plan/", {**PLAN, "models": [{"estimate": {**ESTIMATE,
                                                                                      "namespace": namespace}}]})],
        "dashboard": [("GET", "/", None)],
        "rightsizing": [("GET", "/rightsizing/", None)],
        "audit": [("GET", "/audit/", None), ("GET", f"/audit/?page={deep_catalog}", None)],
        "api_list": [("GET", f"/api/inferencemodels/?limit={API_LIMIT}&ordering=name{api_cursor(rows, at, seen)}",
                      None) for at in (0.0, 0.5, 0.9)],
        "api_list_offset": [("GET", f"/api/inferencemodels/?limit={API_LIMIT}&offset={offset}&ordering=name", None)
                            for offset in (0, rows // 2, int(rows * 0.9))],
    }  # fmt: skip
    if seen is not None:
        found = {stem: requests for stem, requests in found.items() if not stem.startswith("admin_")}
    return found


ADMIN_KINDS = (InferenceModel, KubeAIModel, ModelService, InferenceConfig, InferenceRun)


def admin_every_filter(staff: User) -> list[tuple[str, str, object]]:
    """Every list filter (with one value the rows hold) and every sortable column (both ways) of the
    mirrored kinds' changelists, each on its first and its last page, as the admin itself lists
    them (``get_list_filter``, ``get_list_display``: a filter or column added later is measured)."""
    request = RequestFactory().get("/admin/")
    request.user = staff
    found: list[tuple[str, str, object]] = []
    for model in ADMIN_KINDS:
        model_admin = django_admin.site._registry[model]
        path = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        queries: list[tuple[str, int]] = []  # (query, rows it leaves)
        for spec in model_admin.get_list_filter(request):
            name = spec[0] if isinstance(spec, tuple) else spec
            field = model._meta.get_field(name)
            column = field.attname  # cluster_id for the cluster
            value = model.objects.order_by().values_list(column, flat=True).first()
            count = model.objects.filter(**{column: value}).count()
            lookup = f"{name}__id__exact" if field.is_relation else f"{name}__exact"
            queries.append((urlencode({lookup: int(value) if isinstance(value, bool) else value}), count))
        total = model.objects.count()
        columns = model_admin.get_list_display(request)
        offset = 1 if model_admin.get_actions(request) else 0  # the selection checkbox is column 0
        sortable_by = model_admin.get_sortable_by(request)
        for index, name in enumerate(columns, start=offset):
            if name in sortable_by and _sortable(model_admin, model, name):
                queries += [(f"o={index}", total), (f"o=-{index}", total)]
        for query, count in queries:
            last = max(1, math.ceil(count / ADMIN_PAGE_SIZE))
            found += [("GET", f"{path}?{query}", None), ("GET", f"{path}?{query}&p={last}", None)]
    return found


def _sortable(model_admin: object, model: type, name: str) -> bool:
    """Whether the changelist sorts by column ``name``: a model field, or a callable naming its
    ``admin_order_field``."""
    try:
        model._meta.get_field(name)
        return True
    except FieldDoesNotExist:
        attribute = getattr(model_admin, name, None) or getattr(model, name, None)
        return bool(getattr(attribute, "admin_order_field", None))


def _percentile(samples: Sequence[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def _client(
    session: aiohttp.ClientSession, base: str, requests: list, start: int, until: float, samples: list[float]
) -> None:
    number = start
    while time.perf_counter() < until:
        method, path, body = requests[number % len(requests)]
        number += 1
        began = time.perf_counter()
        kwargs = ({"json": body} if path.startswith("/api/") else {"data": body}) if body is not None else {}
        async with session.request(method, base + path, allow_redirects=False, **kwargs) as response:
            text = await response.read()
            if response.status != 200:
                raise RuntimeError(f"{method} {path}: {response.status} {text[:300]!r}")
        samples.append((time.perf_counter() - began) * 1000)


async def _drive(
    base: str, cookies: dict[str, str], requests: list, seconds: float, warmed: Callable[[], None]
) -> tuple[list[float], float]:
    """Warm up, call ``warmed()``, then time ``seconds`` of requests: the latencies and the rate."""
    headers = {"X-CSRFToken": CSRF, "Referer": base + "/"}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, cookies=cookies, headers=headers) as session:
        await asyncio.gather(*(_client(session, base, requests, n, time.perf_counter() + 1.0, [])
                               for n in range(CLIENTS)))  # fmt: skip
        warmed()
        samples: list[float] = []
        began = time.perf_counter()
        await asyncio.gather(*(_client(session, base, requests, n, began + seconds, samples) for n in range(CLIENTS)))
        return samples, len(samples) / (time.perf_counter() - began)


def measure(server: Server, cookies: dict[str, str], stem: str, requests: list, seconds: float) -> dict[str, float]:
    """Latencies and throughput of ``requests`` against ``server``, and the CPU each request cost the
    server's processes, the database's backends and this process (the load generator)."""
    spans = {"server": CpuSpan(lambda: process_tree(server.pid)),
             "db": CpuSpan(lambda: database_backends(settings.DATABASES["default"]["NAME"])),
             "client": CpuSpan(lambda: [os.getpid()])}  # fmt: skip

    def warmed() -> None:
        for span in spans.values():
            span.start()

    samples, rate = asyncio.run(_drive(server.url, cookies, requests, seconds, warmed))
    spent = {name: span.stop() for name, span in spans.items()}
    figures = {f"http.{stem}_p50_ms": _percentile(samples, 0.5), f"http.{stem}_p99_ms": _percentile(samples, 0.99),
               f"http.{stem}_rps": rate}  # fmt: skip
    # the requests still in flight when the time was up cost CPU too: at most one per client
    answered = max(1, len(samples))
    return figures | {f"http.{stem}_{name}_cpu_ms": 1000 * seconds / answered for name, seconds in spent.items()}


PROBE_PAUSE_S = 0.05
PROBE_LOAD_GROUP = "catalog_sorted"  # the pages the workers are kept busy with while the probes are timed
PROBE_WARM_UP_S = 1.0  # every page client sending before the first probe


async def _probe(url: str, until: float, samples: list[float]) -> None:
    """GET ``url`` as a kubelet does (a new connection each time, no cookies) until ``until``."""
    await asyncio.sleep(PROBE_WARM_UP_S)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
        while time.perf_counter() < until:
            began = time.perf_counter()
            async with session.get(url) as response:
                text = await response.read()
                if response.status != 200:
                    raise RuntimeError(f"GET {url}: {response.status} {text[:300]!r}")
            samples.append((time.perf_counter() - began) * 1000)
            await asyncio.sleep(PROBE_PAUSE_S)


async def _probes_under_load(
    base: str, cookies: dict[str, str], requests: list, seconds: float
) -> tuple[dict[str, list[float]], list[float]]:
    """/healthz's and /readyz's latencies while ``CLIENTS`` clients send ``requests``, and the pages'."""
    headers = {"X-CSRFToken": CSRF, "Referer": base + "/"}
    until = time.perf_counter() + PROBE_WARM_UP_S + seconds
    probes: dict[str, list[float]] = {"healthz": [], "readyz": []}
    pages: list[float] = []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, cookies=cookies, headers=headers) as session:
        pagers = [_client(session, base, requests, n, until, pages) for n in range(CLIENTS)]
        await asyncio.gather(*pagers, *(_probe(f"{base}/{name}", until, samples) for name, samples in probes.items()))
    return probes, pages


def probes_under_load(server: Server, cookies: dict[str, str], requests: list, seconds: float) -> dict[str, float]:
    """The probes' p50 and p99 while the page workers are kept busy with ``requests`` (module docstring)."""
    probes, pages = asyncio.run(_probes_under_load(server.url, cookies, requests, seconds))
    figures = {"http.probes_load_pages_p99_ms": _percentile(pages, 0.99)}
    for name, samples in probes.items():
        figures[f"http.{name}_p50_ms_under_load"] = _percentile(samples, 0.5)
        figures[f"http.{name}_p99_ms_under_load"] = _percentile(samples, 0.99)
        figures[f"http.{name}_probes_under_load"] = float(len(samples))
    return figures


def signed_in_cookies(user: User) -> dict[str, str]:
    """Session and CSRF cookies of ``user`` for the server bench/http_server.py starts (which signs
    with its own SECRET_KEY; sessions live in the shared database)."""
    client = Client()
    with override_settings(SECRET_KEY=SERVER_SECRET_KEY):
        client.force_login(user)
    return {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value,
            settings.CSRF_COOKIE_NAME: CSRF}  # fmt: skip


FLEET_PODS = 20
FLEET_PAGES = [("GET", "/fleet/pods/", None), ("GET", "/fleet/events/", None)]


@contextmanager
def fleet_clusters(clusters: list[Cluster]) -> Iterator[bool]:
    """The dataset's clusters pointed at the real control plane (every one but the last, each under
    its own name) and the last at an address that accepts and never answers; False (and nothing
    pointed) where the control plane cannot run here."""
    with ExitStack() as stack:
        try:
            plane = stack.enter_context(running_control_plane(prepare=apply_crds_to))
        except ControlPlaneUnavailable as reason:
            print(f"fleet figures skipped: {reason}")
            yield False
            return
        silent = stack.enter_context(SilentServer())
        _deploy_pods(plane, "team-00", FLEET_PODS)
        for cluster in clusters[:-1]:
            cluster.auth_method, cluster.server_url = Cluster.AuthMethod.TOKEN, plane.url
            cluster.bearer_token, cluster.ca_cert = ADMIN_TOKEN, plane.ca_pem
            cluster.save()
        hung = clusters[-1]
        hung.auth_method, hung.server_url, hung.bearer_token = Cluster.AuthMethod.TOKEN, silent.url, "t"
        hung.insecure_skip_tls_verify = True
        hung.save()
        yield True


def _deploy_pods(plane: ControlPlane, namespace: str, replicas: int) -> None:
    """A Deployment of ``replicas`` pods in ``namespace``, waited for until kwok runs them all."""
    labels = {"app": "bench-fleet"}
    with plane.api_client() as api_client:
        kubernetes.client.CoreV1Api(api_client).create_namespace({"metadata": {"name": namespace}})
        kubernetes.client.AppsV1Api(api_client).create_namespaced_deployment(namespace, {
            "metadata": {"name": "bench-fleet"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "server", "image": "bench/server:1",
                                         "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]},
            }},
        })  # fmt: skip
        core = kubernetes.client.CoreV1Api(api_client)

        def running() -> bool:
            pods = core.list_namespaced_pod(namespace, label_selector="app=bench-fleet").items
            return len(pods) == replicas and all(pod.status.phase == "Running" for pod in pods)

        deadline = time.monotonic() + 120
        while not running():
            if time.monotonic() > deadline:
                raise RuntimeError(f"kwok did not run the {replicas} pods of bench-fleet in 120 s")
            time.sleep(0.2)


def admin_figures(server: Server, cookies: dict[str, str], staff: User, rows: int) -> dict[str, float]:
    """The admin's groups (staff's only): its changelist's first and deep pages by pool, and every
    filter and sort of the mirrored kinds' changelists (``admin_every_filter``)."""
    figures: dict[str, float] = {}
    for stem, requests in groups(rows).items():
        if stem.startswith("admin_"):
            figures.update(measure(server, cookies, stem, requests, SECONDS))
    every_filter = admin_every_filter(staff)
    figures["http.admin_changelist_every_filter_urls"] = float(len(every_filter))
    figures.update(measure(server, cookies, "admin_changelist_every_filter", every_filter, SECONDS))
    return figures


def database_env() -> dict[str, str]:
    db = settings.DATABASES["default"]
    url = f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    return {"DATABASE_URL": url, "DATABASE_CONN_MAX_AGE": "60"}


def run() -> dict[str, float]:
    figures = {"http.load_1m_before": os.getloadavg()[0]}
    data = build(models_per_cluster=MODELS_PER_CLUSTER, observations=2 * 10 * MODELS_PER_CLUSTER)
    rows = data.counts["InferenceModel"]
    figures["http.rows"] = float(rows)
    figures["http.audit_entries"] = float(add_audit_entries())
    staff = User.objects.create_superuser("bench-http-admin", email="", password=None)
    cookies = signed_in_cookies(staff)
    member_cookies = signed_in_cookies(data.member)
    seen = InferenceModel.objects.filter(cluster=data.clusters[0], namespace__in=data.member_namespaces)
    figures["http.member_rows"] = float(data.member_models)
    env = database_env()
    if ADMIN_ONLY:
        with production_server(env) as server:
            figures.update(admin_figures(server, cookies, staff, rows))
        figures["http.load_1m_after"] = os.getloadavg()[0]
        return figures
    compared = {"gunicorn_gthread": ALTERNATIVES["gunicorn_gthread"], "granian": ALTERNATIVES["granian"],
                "nginx_gunicorn": None}  # fmt: skip  # None: the deploy's own command
    stem = "catalog_first"
    for model, command in compared.items():  # the server models side by side on one page, before the full run
        with production_server(env, command) as server:
            for key, value in measure(server, cookies, stem, groups(rows)[stem], SECONDS).items():
                figures[key.replace("http.", f"http.server_{model}_")] = value
    with production_server(env) as server:
        for stem, requests in groups(rows).items():
            if not stem.startswith("admin_"):
                figures.update(measure(server, cookies, stem, requests, SECONDS))
        for stem, requests in groups(data.member_models, seen).items():
            figures.update(measure(server, member_cookies, f"member_{stem}", requests, SECONDS))
        figures.update(admin_figures(server, cookies, staff, rows))
        figures.update(probes_under_load(server, cookies, groups(rows)[PROBE_LOAD_GROUP], SECONDS))
        figures["http.healthz_under_slowloris_ok"] = float(
            healthz_answers_under_slow_clients(server.url, connections=SLOWLORIS_CONNECTIONS)
        )
    with fleet_clusters(data.clusters) as pointed, production_server(env) as server:
        if pointed:  # a fresh server: no worker keeps a read of the clusters as they were
            figures.update(measure(server, cookies, "fleet_all_clusters", FLEET_PAGES, SECONDS))
            figures.update(measure(server, member_cookies, "member_fleet_all_clusters", FLEET_PAGES, SECONDS))
    figures["http.load_1m_after"] = os.getloadavg()[0]
    return figures
