"""``make run`` with Go: the live demo end to end, as a new user meets it. ``make run`` starts in
the background in a fresh clone of the repository (on a fresh SQLite database); the portal
answers; the gateway answers a chat for a demo model that was at zero (woken by that request); the
demo run reaches Succeeded; and Ctrl-C (SIGINT to the process group, as a terminal sends it)
leaves no process and no port behind. A restart keeps what people set on the demo cluster."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from queue import Empty, Queue

import kubernetes
import pytest
import requests
from django.conf import settings

from devstack.control_plane import ControlPlaneUnavailable, build_binaries, free_port
from devstack.live_demo import DEMO_MODEL

pytestmark = pytest.mark.realcluster
STARTED = "Ctrl-C stops everything."


def descendants(root: int) -> set[int]:
    """Every live process below ``root`` (by parent pid, from /proc)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def read_until(lines: Queue, marker: str, timeout: float) -> str:
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except Empty:
            continue
        if line is None:
            break
        seen.append(line)
        if marker in line:
            return "".join(seen)
    raise AssertionError(f"no {marker!r} within {timeout} s; output:\n{''.join(seen)[-5000:]}")


def drain(lines: Queue) -> str:
    """What the command printed after the last read, up to its end."""
    rest = []
    while (line := lines.get(timeout=10)) is not None:
        rest.append(line)
    return "".join(rest)


def assert_every_demo_model_answers(gateway_port: int, token: str) -> None:
    """Every model the gateway lists answers a chat through it (issue 43): the InferenceModels from the
    simulated engine they point at (each woken from zero), KubeAI's Models and the ModelServices from the
    engines behind the Services the demo publishes, several of them, among which the gateway picks."""
    gateway, auth = f"http://127.0.0.1:{gateway_port}", {"Authorization": f"Bearer {token}"}
    models = requests.get(f"{gateway}/v1/models", headers=auth, timeout=30).json()["data"]
    assert {entry["owned_by"].split()[0] for entry in models} == {"InferenceModel", "Model", "ModelService"}
    for entry in models:
        answer = requests.post(f"{gateway}/v1/chat/completions", headers=auth, timeout=300, json={
            "model": entry["id"], "messages": [{"role": "user", "content": "does every demo model answer"}]})
        assert answer.status_code == 200, f"{entry['id']}: {answer.status_code} {answer.text}"
        assert answer.json()["choices"][0]["message"]["content"] == "does every demo model answer"
    replicas = {requests.post(f"{gateway}/v1/chat/completions", headers=auth, timeout=60, json={
        "model": "default/llama-3.1-8b-instruct-fp8-l4",  # PrefixHash: each first message its own place on the ring
        "messages": [{"role": "user", "content": f"conversation {index}"}]}).headers["X-Gateway-Replica"]
        for index in range(10)}
    assert len(replicas) > 1, replicas


@pytest.fixture
def binaries() -> None:
    try:
        build_binaries()
    except ControlPlaneUnavailable as reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the real control plane: {reason}")
        pytest.skip(str(reason))


@pytest.fixture
def fresh_clone(tmp_path: Path) -> Path:
    """The repository as a new user clones it (its committed state). It shares the virtual
    environment this suite runs in, which ``make test`` installed from the same requirements, so
    ``make run`` finds it up to date instead of taking minutes to build a second one."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(settings.BASE_DIR), str(clone)], check=True, timeout=300)
    (clone / ".venv").symlink_to(Path(sys.prefix))
    installed = Path(sys.prefix) / "bin" / ".installed"  # the Makefile's $(BIN)/.installed
    if installed.exists():
        installed.touch()  # newer than the clone's requirements files: make's install step is done
    return clone


def test_the_live_demo_serves_wakes_runs_and_stops_clean(binaries, fresh_clone: Path, tmp_path: Path) -> None:
    port, gateway_port = free_port(), free_port()
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "REDIS_URL", "CELERY_BROKER_URL",
                                  "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    environment |= {"DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}", "PORT": str(port),
                    "GATEWAY_PORT": str(gateway_port), "DEMO_ADMIN_PASSWORD_FILE": str(tmp_path / "password")}
    demo = subprocess.Popen(["make", "run"], env=environment, cwd=fresh_clone, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as from a terminal
    lines: Queue = Queue()
    threading.Thread(target=lambda: [*map(lines.put, demo.stdout), lines.put(None)], daemon=True).start()
    started: set[int] = set()
    try:
        banner = read_until(lines, STARTED, timeout=600)
        token = re.search(r"Bearer ([^'\s]+)'", banner).group(1)
        kubeconfig = re.search(r"KUBECONFIG=(\S+)", banner).group(1)
        started = descendants(demo.pid)
        api_server = int(re.search(r"https://127\.0\.0\.1:(\d+)", Path(kubeconfig).read_text()).group(1))

        assert re.search(rf"Portal: +http://127\.0\.0\.1:{port}/ +\(username admin, password \S+\)", banner)
        assert requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
        assert "password" in requests.get(f"http://127.0.0.1:{port}/", timeout=10).text  # the login page

        apps = kubernetes.client.AppsV1Api(kubernetes.config.new_client_from_config(config_file=kubeconfig))
        assert apps.read_namespaced_deployment(DEMO_MODEL, "default").spec.replicas == 0  # at zero
        chat = requests.post(
            f"http://127.0.0.1:{gateway_port}/v1/chat/completions", timeout=300,
            headers={"Authorization": f"Bearer {token}"},
            json={"model": DEMO_MODEL, "messages": [{"role": "user", "content": "hello live demo"}]},
        )
        assert chat.status_code == 200, chat.text
        answer = chat.json()
        assert answer["choices"][0]["message"]["content"] == "hello live demo" and answer["usage"]["total_tokens"]
        assert apps.read_namespaced_deployment(DEMO_MODEL, "default").spec.replicas == 1  # woken
        assert_every_demo_model_answers(gateway_port, token)

        custom = kubernetes.client.CustomObjectsApi(kubernetes.config.new_client_from_config(config_file=kubeconfig))

        def run_phase() -> str | None:
            run = custom.get_namespaced_custom_object("ai.krateo.io", "v1", "kserve-controller-system",
                                                      "inferenceruns", "iris-run-january")
            return (run.get("status") or {}).get("phase")

        deadline = time.monotonic() + 120
        while run_phase() != "Succeeded":
            assert time.monotonic() < deadline, f"the demo run is {run_phase()}, not Succeeded"
            time.sleep(0.5)
        runs = requests.get(f"http://127.0.0.1:{port}/api/inferenceruns/?name=iris-run-january", timeout=10,
                            headers={"Authorization": f"Token {token}"}).json()
        assert [r["status"]["phase"] for r in runs["results"] if r["cluster"] == "local"] == ["Succeeded"]
        ports = [port, gateway_port, api_server]
        assert all(listening(each) for each in ports)
    finally:
        os.killpg(demo.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        try:
            code = demo.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(demo.pid, signal.SIGKILL)
            raise
    # run_demo exits 0 on Ctrl-C; make, interrupted with it, says so with its own status
    assert code in (0, 2, -signal.SIGINT), drain(lines)[-5000:]
    assert started and not [pid for pid in started if alive(pid)], "processes left behind"
    assert not [each for each in ports if listening(each)], "ports left open"


# What people decide about the demo cluster, set between two starts (``manage.py shell``, on the
# demo's own database): every kind of row that hangs on the ``local`` Cluster or its node pools,
# and the team-wide ones beside them.
DECIDE = """
from accounts.models import GroupMapping, NamespaceGrant, Team
from clusters.models import Cluster
from governance.models import GpuPrice, Limit
from inference_gateway.models import BackendHost, SharedNamespace
from scheduler.models import NodePool, TeamQuota
cluster = Cluster.objects.get(name="local")
team = Team.objects.create(name="restarters")
NamespaceGrant.objects.create(team=team, cluster=cluster, namespace="default")
pool = NodePool.objects.filter(cluster=cluster).order_by("name").first()
pool.budget_bytes = 2**30
pool.save()
TeamQuota.objects.create(team=team, pool=pool, guaranteed_bytes=2**29)
SharedNamespace.objects.create(cluster=cluster, namespace="ml-platform")
BackendHost.objects.create(cluster=cluster, host="api.example.com")
Limit.objects.create(team=team, requests_per_minute=7)
GpuPrice.objects.create(gpu_product="restart-test", price_per_gpu_hour=3)
GroupMapping.objects.create(group="restarters-group", team=team)
print(cluster.pk, cluster.server_url)
"""

# What is left of it after the restart, and where the cluster row points now.
KEPT = """
import json
from accounts.models import GroupMapping, NamespaceGrant
from clusters.models import Cluster
from governance.models import GpuPrice, Limit
from inference_gateway.models import BackendHost, SharedNamespace
from models_app.models import InferenceModel
from scheduler.models import TeamQuota
cluster = Cluster.objects.get(name="local")
grant = NamespaceGrant.objects.get(team__name="restarters")
quota = TeamQuota.objects.get(team__name="restarters")
print(json.dumps({
    "cluster": [cluster.pk, cluster.server_url],
    "grant": [grant.cluster_id, grant.namespace],
    "quota": [quota.pool.cluster_id, quota.pool.budget_bytes, quota.guaranteed_bytes],
    "shared": [list(SharedNamespace.objects.values_list("cluster_id", "namespace")),
               list(BackendHost.objects.values_list("cluster_id", "host"))],
    "team-wide": [Limit.objects.get(team__name="restarters").requests_per_minute,
                  str(GpuPrice.objects.get(gpu_product="restart-test").price_per_gpu_hour),
                  GroupMapping.objects.get(group="restarters-group").team.name],
    "models in the grant": InferenceModel.objects.filter(cluster=cluster, namespace=grant.namespace).count(),
}))
"""


def test_a_restart_keeps_what_people_set_on_the_demo_cluster(binaries, tmp_path: Path) -> None:
    """Issue 43: restarting the demo replaced the ``local`` Cluster row, and with it (by cascade)
    every team's grants, quotas, pool budgets and gateway decisions. ``run_demo`` (what ``make
    run`` runs, less make) starts, is stopped with SIGTERM, decisions are made, it starts again on
    a new control plane: every decision is there, on the same cluster row, and the grant's
    namespace holds the new control plane's models."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "REDIS_URL", "CELERY_BROKER_URL")}
    environment |= {"DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
                    "DEMO_ADMIN_PASSWORD_FILE": str(tmp_path / "password")}
    manage = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py")]

    def command(*arguments: str) -> str:
        done = subprocess.run([*manage, *arguments], env=environment, cwd=settings.BASE_DIR, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout.splitlines()[-1] if done.stdout.strip() else ""  # its answer: the last line

    def start_and_stop() -> None:
        demo = subprocess.Popen([*manage, "run_demo", "--port", str(free_port()), "--gateway-port", str(free_port())],
                                env=environment, cwd=settings.BASE_DIR, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        lines: Queue = Queue()
        threading.Thread(target=lambda: [*map(lines.put, demo.stdout), lines.put(None)], daemon=True).start()
        try:
            read_until(lines, STARTED, timeout=600)
        finally:
            demo.terminate()  # SIGTERM, as a service manager stops it
            try:
                code = demo.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(demo.pid, signal.SIGKILL)
                raise
        assert code == 0, drain(lines)[-5000:]

    command("migrate", "--noinput")
    start_and_stop()
    cluster_id, first_url = command("shell", "-c", DECIDE).split()
    start_and_stop()
    kept = json.loads(command("shell", "-c", KEPT))

    cluster = int(cluster_id)
    assert kept["cluster"][0] == cluster and kept["cluster"][1] != first_url  # same row, the new control plane
    assert kept["grant"] == [cluster, "default"]
    assert kept["quota"] == [cluster, 2**30, 2**29]
    assert kept["shared"] == [[[cluster, "ml-platform"]], [[cluster, "api.example.com"]]]
    assert kept["team-wide"] == [7, "3.0000", "restarters"]
    assert kept["models in the grant"] > 0  # the team sees the restarted cluster's models
