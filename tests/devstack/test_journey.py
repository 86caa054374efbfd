"""Issue 43 item 9: one test walks a team's whole journey through the live demo as a new user meets it:
``make run`` in a fresh clone of the repository (the control plane with kwok, the watcher, the gateway,
the simulated engines and the project's OpenID provider, on a fresh SQLite database), in Chromium and
through the official ``openai`` client; then Ctrl-C, which leaves no process and no port behind; then
a second ``make run`` on the same database, which finds everything people decided still there, and a
service manager's SIGTERM, which stops it with status 0.

The demo takes minutes to start on a busy machine, so the journey starts it twice (the least a restart
needs) and every check that needs a running demo is a step of this one test, in the order a user takes
them (docs/demo.md's tour among them). Each step is what a user would see or receive."""

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
from collections.abc import Callable, Iterator
from pathlib import Path
from queue import Empty, Queue
from typing import Any
from urllib.parse import urlsplit

import kubernetes
import pytest
import requests
import yaml
from django.conf import settings
from playwright.sync_api import expect

from devstack.control_plane import ControlPlaneUnavailable, build_binaries, free_port
from devstack.demo_load import Tally, send_load
from devstack.live_demo import DEMO_MODEL, SSO_PEOPLE, SSO_PROVIDER_NAME, SSO_TEAMS
from devstack.oidc_provider import ProviderUnavailable, build_binary
from tests.browser.conftest import open_chromium

pytestmark = pytest.mark.realcluster
STARTED = "Ctrl-C stops everything."
ENV_NOT_PASSED = ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "REDIS_URL", "CELERY_BROKER_URL", "MAKEFLAGS", "MFLAGS",
                  "MAKELEVEL")  # fmt: skip
# The guided deploy's two kinds, each from a preset: (kind, preset, object name).
GUIDED = [("InferenceModel", "qwen2.5-7b-instruct", "journey-qwen"), ("Model", "gemma-2-2b-it", "journey-gemma")]
BROKEN = "llama-2-7b"  # docs/demo.md step 3
SCALED = "llama-3.1-8b-instruct-fp8-l4"  # docs/demo.md step 8: KubeAI's autoscaler takes it out and back
TOO_MANY_GPUS = "64"  # more than any demo pool holds


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


def wait_until(condition: Callable[[], Any], what: str, timeout: float = 180) -> Any:
    """``condition()``'s first truthy answer: the cluster and the controller act shortly after a page's
    answer, not during it. The deadline is only a way out, with what never came."""
    deadline = time.monotonic() + timeout
    while not (answer := condition()):
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.5)
    return answer


class Demo:
    """``make run`` in a fresh clone, on its own ports and database. :meth:`interrupt` is Ctrl-C in the
    terminal; :meth:`terminate` is a service manager's SIGTERM to ``run_demo``; a second :meth:`start` on
    the same database is the restart a user makes."""

    def __init__(self, clone: Path, tmp_path: Path) -> None:
        self.clone = clone
        self.environment = {key: value for key, value in os.environ.items() if key not in ENV_NOT_PASSED}
        self.environment |= {"DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
                             "DEMO_ADMIN_PASSWORD_FILE": str(tmp_path / "password")}
        self.process: subprocess.Popen | None = None

    def command(self, *arguments: str) -> str:
        """``manage.py`` on the demo's database; what it printed last (its answer)."""
        done = subprocess.run([sys.executable, "manage.py", *arguments], env=self.environment, cwd=self.clone,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout.splitlines()[-1] if done.stdout.strip() else ""

    def start(self) -> None:
        """``make run`` as from a terminal, until its banner (the moment it tells a user to go)."""
        self.port, self.gateway_port = free_port(), free_port()
        self.process = subprocess.Popen(
            ["make", "run"], env=self.environment | {"PORT": str(self.port), "GATEWAY_PORT": str(self.gateway_port)},
            cwd=self.clone, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as from a terminal
        self.lines: Queue = Queue()
        threading.Thread(target=lambda: [*map(self.lines.put, self.process.stdout), self.lines.put(None)],
                         daemon=True).start()
        self.banner = read_until(self.lines, STARTED, timeout=600)
        self.started = descendants(self.process.pid)
        self.token = re.search(r"Bearer ([^'\s]+)'", self.banner).group(1)
        self.password = re.search(r"username admin, password (\S+)\)", self.banner).group(1)
        kubeconfig = re.search(r"KUBECONFIG=(\S+)", self.banner).group(1)
        self.api_server = int(re.search(r"https://127\.0\.0\.1:(\d+)", Path(kubeconfig).read_text()).group(1))
        self.api_client = kubernetes.config.new_client_from_config(config_file=kubeconfig)

    @property
    def portal(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def gateway(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port}/v1"

    @property
    def ports(self) -> list[int]:
        return [self.port, self.gateway_port, self.api_server]

    def _wait(self) -> int:
        try:
            return self.process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            raise

    def _left_nothing(self) -> None:
        assert self.started and not [pid for pid in self.started if alive(pid)], "processes left behind"
        assert not [each for each in self.ports if listening(each)], "ports left open"

    def interrupt(self) -> None:
        """Ctrl-C: SIGINT to the process group, as a terminal sends it. ``run_demo`` exits 0 on it, make,
        interrupted with it, says so with its own status; nothing it started is left."""
        os.killpg(self.process.pid, signal.SIGINT)
        code = self._wait()
        assert code in (0, 2, -signal.SIGINT), drain(self.lines)[-5000:]
        self._left_nothing()

    def terminate(self) -> None:
        """SIGTERM to ``run_demo`` alone, as a service manager stops it: it exits 0, and make with it."""
        run_demo = next(pid for pid in self.started if b"run_demo" in Path(f"/proc/{pid}/cmdline").read_bytes())
        os.kill(run_demo, signal.SIGTERM)
        assert self._wait() == 0, drain(self.lines)[-5000:]
        self._left_nothing()

    def stop(self) -> None:
        """Whatever is left of it, at the test's end however it went."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            self._wait()


@pytest.fixture
def binaries() -> None:
    try:
        build_binaries()
    except ControlPlaneUnavailable as reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the real control plane: {reason}")
        pytest.skip(str(reason))


@pytest.fixture
def provider_built() -> None:
    """The journey signs in through the project's OpenID provider, which the demo starts only when built."""
    try:
        build_binary()
    except ProviderUnavailable as reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the OpenID provider: {reason}")
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


@pytest.fixture
def browser() -> Iterator:
    """A Chromium for the journey alone, closed when it ends (its worker's next tests run event
    loops of their own, which Playwright's open one would refuse)."""
    with open_chromium() as chromium:
        yield chromium


@pytest.fixture
def demo(binaries, provider_built, fresh_clone: Path, tmp_path: Path) -> Iterator[Demo]:
    running = Demo(fresh_clone, tmp_path)
    try:
        yield running
    finally:
        running.stop()


# ---- the steps, each as a user takes it -------------------------------------------------------------


def new_tab(browser, demo: Demo):
    tab = browser.new_context(base_url=demo.portal).new_page()
    tab.set_default_timeout(60_000)
    return tab


def sign_in_with_password(browser, demo: Demo):
    """The login page's own form, with the admin password the banner printed."""
    tab = new_tab(browser, demo)
    tab.goto("/")
    expect(tab).to_have_url(re.compile(r"/login/\?next=/$"))
    expect(tab.locator("#id_password")).to_be_visible()
    tab.fill("#id_username", "admin")
    tab.fill("#id_password", demo.password)
    tab.click("button[type=submit]")
    expect(tab.locator("h1")).to_have_text("Dashboard")
    return tab


def sign_in_with_sso(browser, demo: Demo, username: str, password: str):
    """The login page's provider button, the provider's own form, back on the portal's dashboard."""
    tab = new_tab(browser, demo)
    tab.goto("/")
    tab.click(f"text=Sign in with {SSO_PROVIDER_NAME}")
    expect(tab.locator("#username")).to_be_visible()  # the provider's page, not the portal's
    tab.fill("#username", username)
    tab.fill("#password", password)
    tab.click("button[type=submit]")
    expect(tab.locator("h1")).to_have_text("Dashboard")
    return tab


def person(username: str) -> tuple[str, str]:
    """(user name, password) of a demo person."""
    return next((name, password) for _, name, password, _ in SSO_PEOPLE if name == username)


def every_team_shows_its_grant(browser, demo: Demo) -> None:
    """Each demo person, signed in through the provider, reads their team and its namespace on their account page."""
    for _, username, password, groups in SSO_PEOPLE:
        tab = sign_in_with_sso(browser, demo, username, password)
        tab.goto("/account/")
        grants = tab.locator("table").first
        for team, (group, namespace) in SSO_TEAMS.items():
            if group in groups:
                expect(grants).to_contain_text(team)
                expect(grants).to_contain_text(namespace)
            else:
                expect(grants).not_to_contain_text(team)
        tab.context.close()


def reload_until(tab, path: str, shows: Callable[[Any], bool], what: str, timeout: float = 120) -> None:
    """Reloads ``path`` until the page shows what a user waits for (the ledger, the samples and the
    controller's status are written shortly after the requests, not during them)."""
    deadline = time.monotonic() + timeout
    while True:
        tab.goto(path)
        if shows(tab):
            return
        assert time.monotonic() < deadline, f"{path} never showed {what}: {tab.locator('body').inner_text()[-3000:]}"
        time.sleep(1)


def says(client, model: str, said: str) -> None:
    """``model`` answers ``said`` through the gateway with the official client (the engines echo)."""
    answer = client.chat.completions.create(model=model, messages=[{"role": "user", "content": said}])
    assert answer.choices[0].message.content == said, model
    assert answer.usage.total_tokens > 0, model


def the_first_request_wakes_the_demo_model(demo: Demo) -> None:
    """The banner's ``curl``: the demo model is at zero, the request wakes it and is answered."""
    assert re.search(rf"Portal: +http://127\.0\.0\.1:{demo.port}/ +\(username admin, password \S+\)", demo.banner)
    assert requests.get(f"{demo.portal}/healthz", timeout=10).status_code == 200
    assert "password" in requests.get(f"{demo.portal}/", timeout=10).text  # the login page
    apps = kubernetes.client.AppsV1Api(demo.api_client)
    assert apps.read_namespaced_deployment(DEMO_MODEL, "default").spec.replicas == 0  # at zero
    chat = requests.post(f"{demo.gateway}/chat/completions", timeout=300, headers={
        "Authorization": f"Bearer {demo.token}"}, json={
        "model": DEMO_MODEL, "messages": [{"role": "user", "content": "hello live demo"}]})  # fmt: skip
    assert chat.status_code == 200, chat.text
    answer = chat.json()
    assert answer["choices"][0]["message"]["content"] == "hello live demo" and answer["usage"]["total_tokens"]
    assert apps.read_namespaced_deployment(DEMO_MODEL, "default").spec.replicas == 1  # woken


def watch_its_pod_in_the_live_panel(tab, demo: Demo) -> None:
    """docs/demo.md step 2: the woken model's page lists, live from the cluster, its Deployment and its
    pod, which kwok runs."""
    open_model_page(tab, "InferenceModel", DEMO_MODEL)
    expect(tab.locator("#live-workloads")).to_contain_text("Deployment")
    expect(tab.locator("#live-pods .badge.Running").first).to_be_visible()
    expect(tab.locator("#live-pods")).to_contain_text(f"{DEMO_MODEL}-")


def submit_a_run(tab) -> None:
    """docs/demo.md step 4: Runs → Submit a run with ``example-inference-config``; its page follows it to
    Succeeded (polled every 2 s), as the demo's own run did."""
    tab.goto("/runs/")
    tab.click("text=Submit a run")
    config = tab.locator("#id_config option", has_text="/example-inference-config ").get_attribute("value")
    tab.select_option("#id_config", config)
    tab.fill("#id_name", "journey-run")
    tab.click("#run-form button[type=submit]")
    expect(tab.locator("h1")).to_contain_text("journey-run")
    expect(tab.locator("#run-phase")).to_have_text("Succeeded", timeout=180_000)


def a_shared_prefix_stays_on_one_replica(client) -> None:
    """docs/demo.md step 7: three questions under one long system prompt to ``qwen3-8b`` (three engines
    behind its Service); the second and third go where the first went, picked by ``prefix-cache``."""
    system = "You are the support assistant of the demo shop. " * 60
    picks = []
    for question in ("Where is my order?", "Can I change the address?", "When will it arrive?"):
        answer = client.chat.completions.with_raw_response.create(model="default/Qwen/Qwen3-8B", messages=[
            {"role": "system", "content": system}, {"role": "user", "content": question}])  # fmt: skip
        picks.append((answer.headers["X-Gateway-Replica"], answer.headers["X-Gateway-Picked-By"]))
    assert [replica for replica, _ in picks] == [picks[0][0]] * 3, picks
    assert [picked for _, picked in picks[1:]] == ["prefix-cache"] * 2, picks


def load_scales_a_kubeai_model_out_and_back(demo: Demo) -> None:
    """docs/demo.md step 8: ``python -m devstack.demo_load`` keeps 80 requests in flight to the KubeAI
    Model ``llama-3.1-8b-instruct-fp8-l4`` (targetRequests 32, maxReplicas 3, PrefixHash): the portal's
    autoscaler takes it past one replica, whose Pods' engines answer (each client's conversation its own
    place on the ring); once the load ends, after its scaleDownDelaySeconds (60 s), back to zero."""
    custom = kubernetes.client.CustomObjectsApi(demo.api_client)

    def replicas() -> int:
        model = custom.get_namespaced_custom_object("kubeai.org", "v1", "default", "models", SCALED)
        return ((model.get("status") or {}).get("replicas") or {}).get("all") or 0

    stop, tally = threading.Event(), Tally()
    load = threading.Thread(target=send_load, daemon=True, kwargs=dict(
        gateway=demo.gateway.removesuffix("/v1"), token=demo.token, model=f"default/{SCALED}", seconds=600,
        say=lambda line: None, stop=stop, tally=tally))  # fmt: skip
    load.start()
    try:
        wait_until(lambda: replicas() > 1, "the Model scaled out under load", timeout=600)
        wait_until(lambda: len(tally.replicas) > 1, "answers from more than one replica", timeout=300)
    finally:
        stop.set()
        load.join(timeout=600)
    assert tally.answered and not tally.failed, tally.line(0)
    wait_until(lambda: replicas() == 0, "the Model back at zero after scaleDownDelaySeconds", timeout=600)


def open_model_page(tab, kind: str, name: str) -> str:
    """Models → the kind's filter and the name → the model's page; its path."""
    tab.goto(f"/models/?kind={kind}&name={name}")
    tab.locator("#catalog").get_by_role("link", name=name, exact=True).click()
    expect(tab.locator("h1")).to_contain_text(name)
    return urlsplit(tab.url).path


def every_demo_model_answers(client) -> None:
    """Every model the gateway lists answers through the official client (issue 43): the InferenceModels
    from the simulated engine they point at, KubeAI's Models from their Pods' engines (each woken from
    zero), the ModelServices from the engines behind the Services the demo publishes."""
    models = list(client.models.list())
    assert {entry.owned_by.split()[0] for entry in models} == {"InferenceModel", "Model", "ModelService"}
    for entry in models:
        says(client, entry.id, f"does {entry.id} answer the journey")


def the_demo_run_succeeds(demo: Demo) -> None:
    custom = kubernetes.client.CustomObjectsApi(demo.api_client)

    def phase() -> str | None:
        run = custom.get_namespaced_custom_object("ai.krateo.io", "v1", "kserve-controller-system", "inferenceruns",
                                                  "iris-run-january")
        return (run.get("status") or {}).get("phase")

    wait_until(lambda: phase() == "Succeeded", "the demo run Succeeded")
    runs = requests.get(f"{demo.portal}/api/inferenceruns/?name=iris-run-january", timeout=30,
                        headers={"Authorization": f"Token {demo.token}"}).json()
    assert [run["status"]["phase"] for run in runs["results"] if run["cluster"] == "local"] == ["Succeeded"]


def deploy_with_the_guided_form(tab, kind: str, preset: str, name: str) -> str:
    """Models → Deploy a model, as a team member: a preset, "Use" on the first pool that fits, Review
    (what will answer it, and that it fits), Deploy. The model's id for the gateway, as its page gives it."""
    tab.goto("/models/deploy/")
    tab.select_option("#id_kind", kind)
    tab.select_option("#id_preset", preset)
    tab.select_option("#id_cluster", "local")
    expect(tab.locator("#id_namespace")).to_have_value("default")  # ada's team may deploy there
    tab.fill("#id_name", name)
    if kind == "InferenceModel":  # the demo's engine, offered (DEPLOY_BACKEND_URL)
        expect(tab.locator("#id_backend_url")).to_have_value(re.compile(r"^http://127\.0\.0\.1:\d+$"))
    tab.click("#deploy-form button[value=review]")
    tab.locator("#deploy-pools .use-pool").first.click()  # fills pool and GPUs, reviews again
    expect(tab.locator("#deploy-yaml")).to_contain_text("inference-pool" if kind == "InferenceModel" else
                                                        "resourceProfile")
    serving = ("the server at http://127.0.0.1:" if kind == "InferenceModel" else
               f"the Service model-{name} in namespace")
    expect(tab.locator("#deploy-serving")).to_contain_text(serving)
    expect(tab.locator("#deploy-plan .badge")).to_have_text("fits")
    expect(tab.locator("#manifest-errors")).to_have_count(0)
    tab.click("#deploy-apply")
    expect(tab.locator("h1")).to_contain_text(name)
    return re.search(r"Model id (\S+) ", tab.locator("body").inner_text()).group(1)


def kubeai_replicas_are_the_clusters(tab, demo: Demo) -> None:
    """Issue 43, "replica counts match the API": each KubeAI Model's replicas on the catalog and on its
    page are what its object in the cluster reports (``status.replicas``), "—" where it reports none,
    once the mirror has caught up with the object (a Model just deployed is still changing)."""
    custom = kubernetes.client.CustomObjectsApi(demo.api_client)
    models = custom.list_cluster_custom_object("kubeai.org", "v1", "models")["items"]
    assert len(models) > 4  # the demo's four and the guided one
    for name in (obj["metadata"]["name"] for obj in models):
        seen: list = []
        try:
            wait_until(lambda name=name, seen=seen: _replicas_shown_as_reported(tab, custom, name, seen),
                       f"{name}'s replicas on its catalog row and page as its object reports them")
        except AssertionError as error:
            raise AssertionError(f"{error}; last seen (catalog, status.replicas, page agrees): {seen[-1:]}") from None


def _replicas_shown_as_reported(tab, custom, name: str, seen: list) -> bool:
    obj = next(o for o in custom.list_cluster_custom_object("kubeai.org", "v1", "models")["items"]
               if o["metadata"]["name"] == name)
    reported = (obj.get("status") or {}).get("replicas") or {}
    tab.goto(f"/models/?kind=Model&name={name}")
    row = tab.locator("#catalog tbody tr").filter(has=tab.get_by_role("link", name=name, exact=True))
    shown = row.locator("td").nth(6).inner_text().strip()
    row.get_by_role("link", name=name, exact=True).click()
    summary = "replicas {all} running ({ready} ready)".format(**reported) if reported else "replicas — running"
    page = tab.locator("main").inner_text()
    seen.append((shown, reported, summary in page))
    return shown == str(reported.get("all", "—")) and summary in page


def apply_a_rightsizing_recommendation(tab, demo: Demo) -> None:
    """docs/demo.md step 5: Right-sizing → "Apply" on an InferenceModel's row; the recommended memory
    reaches the object in the cluster, and the controller rolls its Deployment to it."""
    tab.goto("/rightsizing/")
    row = tab.locator("tr", has_text="InferenceModel").filter(has=tab.locator("button", has_text="Apply")).first
    name = row.locator("td").nth(3).inner_text().strip()
    recommended = row.locator("button").inner_text().removeprefix("Apply ").strip()
    row.locator("button").click()
    applied = tab.locator("#content tr, main tr").filter(has=tab.get_by_role("cell", name=name, exact=True))
    expect(applied.first).to_contain_text("No change recommended")
    custom, apps = kubernetes.client.CustomObjectsApi(demo.api_client), kubernetes.client.AppsV1Api(demo.api_client)
    wait_until(lambda: custom.get_namespaced_custom_object("inference.eh-ops.io", "v1alpha1", "default",
                                                           "inferencemodels", name)["spec"]["memory"] == recommended,
               f"{name}'s spec.memory {recommended} in the cluster")
    wait_until(lambda: apps.read_namespaced_deployment(name, "default").spec.template.spec.containers[0]
               .resources.requests["memory"] == recommended, f"{name}'s Deployment asking for {recommended}")


def edit_gpus_as_yaml(tab, model_page: str, gpus: str = "", original: str = "") -> str:
    """Edit as YAML: ``spec.resources.requests.gpu`` and ``limits.gpu`` set to ``gpus`` (or the text put
    back to ``original``), saved; the manifest as it was before."""
    tab.goto(model_page)
    tab.click("text=Edit as YAML")
    expect(tab.locator(".cm-editor")).to_be_visible()
    before = after = tab.locator("#id_manifest").input_value()
    if not original:
        manifest = yaml.safe_load(before)
        for side in ("requests", "limits"):
            manifest["spec"]["resources"][side]["gpu"] = gpus
        after = yaml.safe_dump(manifest, sort_keys=False)
    after = original or after
    assert after != before
    tab.evaluate("""(text) => { const view = document.querySelector('#id_manifest').yamlEditor;
        view.dispatch({changes: {from: 0, to: view.state.doc.length, insert: text}}); }""", after)
    tab.click("#save-button")
    expect(tab.locator("h1")).to_contain_text(BROKEN)
    return before


def wake(tab) -> tuple[int, str]:
    """The model page's Wake button: the answer's status and what the page says of it."""
    with tab.expect_response(re.compile(r"/wake/?$")) as answer:
        tab.click("button:has-text('Wake')")
    expect(tab.locator("#wake-result")).not_to_be_empty()
    return answer.value.status, tab.locator("#wake-result").inner_text()


def break_and_mend_a_model(tab, demo: Demo, client) -> None:
    """docs/demo.md step 3, on a model at zero: more GPUs than its pool holds and Wake: the page, the Ready
    condition and the API show InsufficientGPU, and the wake answers 409 with the reason. Put back: it
    wakes and answers."""
    model_page = open_model_page(tab, "InferenceModel", BROKEN)
    original = edit_gpus_as_yaml(tab, model_page, TOO_MANY_GPUS)
    status, said = wake(tab)
    assert status == 409 and "InsufficientGPU" in said, (status, said)
    failure = tab.locator("#last-error")
    reload_until(tab, model_page, lambda page: "InsufficientGPU" in " ".join(failure.all_inner_texts()), "the failure")
    expect(failure).to_contain_text(f"requested {TOO_MANY_GPUS}")
    conditions = tab.locator("tr", has_text="InsufficientGPU").filter(has_text="Ready")
    expect(conditions.first).to_be_visible()
    pk = model_page.rstrip("/").rsplit("/", 1)[1]
    error = requests.get(f"{demo.portal}/api/inferencemodels/{pk}/", timeout=30,
                         headers={"Authorization": f"Token {demo.token}"}).json()["lastError"]
    assert error["reason"] == "InsufficientGPU", error

    edit_gpus_as_yaml(tab, model_page, original=original)
    status, said = wake(tab)
    assert status == 200 and said.startswith("Wake requested"), (status, said)
    reload_until(tab, model_page, lambda page: page.locator(".badge.ok", has_text="ready").count() > 0
                 and page.locator("#last-error").count() == 0, "the mended model ready")
    says(client, f"default/{BROKEN}", "mended")


def hit_a_team_limit(demo: Demo, ada_key: str) -> None:
    """A team limit, set as staff through the REST API; ada (team ml-research, namespace default) sends
    past it with her own API token and reads the 429: its message names the team, its headers the limit."""
    from openai import OpenAI, RateLimitError

    made = requests.post(f"{demo.portal}/api/limits/", headers={"Authorization": f"Token {demo.token}"}, timeout=30,
                         json={"team": "ml-research", "requests_per_minute": 2})
    assert made.status_code == 201, made.text
    ada = OpenAI(base_url=demo.gateway, api_key=ada_key, timeout=300, max_retries=0)
    deadline = time.monotonic() + 120
    with pytest.raises(RateLimitError) as refused:
        while time.monotonic() < deadline:  # until the gateway has read the new limit and the minute fills
            ada.chat.completions.create(model=DEMO_MODEL, messages=[{"role": "user", "content": "past the limit"}])
    assert refused.value.status_code == 429
    assert "team ml-research" in refused.value.message, refused.value.message
    assert refused.value.response.headers["x-ratelimit-limit-requests"] == "2"
    assert int(refused.value.response.headers["retry-after"]) >= 0


def usage_and_gpu_hours(browser, demo: Demo) -> None:
    """The team's requests and GPU-hours on its usage page. The demo samples what models hold every 60 s;
    the test calls the function that loop calls (governance.tasks.sample_gpu_holdings) instead of waiting."""
    admin = sign_in_with_password(browser, demo)
    totals = admin.locator("#usage tfoot th")
    reload_until(admin, "/teams/ml-research/usage/", lambda tab: int(totals.nth(1).inner_text()) > 0,
                 "the team's requests")
    demo.command("shell", "-c", "from governance.tasks import sample_gpu_holdings; sample_gpu_holdings()")
    reload_until(admin, "/teams/ml-research/usage/", lambda tab: float(totals.nth(4).inner_text()) > 0,
                 "the team's GPU-hours")
    admin.context.close()


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


@pytest.mark.long
def test_a_team_walks_the_whole_journey(demo: Demo, browser) -> None:
    from openai import OpenAI

    # docs/demo.md's tour, in its order: the banner's curl wakes a model, its pod in the live panel, a
    # model broken and mended (at zero, as every demo model starts), a run, right-sizing applied, a
    # shared-prefix conversation kept on one replica, load scaling a KubeAI Model out and back; every
    # model through the official client.
    demo.start()
    the_first_request_wakes_the_demo_model(demo)
    client = OpenAI(base_url=demo.gateway, api_key=demo.token, timeout=300, max_retries=0)
    admin = sign_in_with_password(browser, demo)  # with the password the banner printed
    watch_its_pod_in_the_live_panel(admin, demo)
    break_and_mend_a_model(admin, demo, client)
    submit_a_run(admin)
    the_demo_run_succeeds(demo)
    apply_a_rightsizing_recommendation(admin, demo)
    every_demo_model_answers(client)
    a_shared_prefix_stays_on_one_replica(client)
    load_scales_a_kubeai_model_out_and_back(demo)
    admin.context.close()

    # The demo people sign in through single sign-on and find their team's grant; ada deploys a model of
    # each kind with the guided form, and chats with each through the gateway.
    every_team_shows_its_grant(browser, demo)
    ada = sign_in_with_sso(browser, demo, *person("ada"))
    for kind, preset, name in GUIDED:
        model = deploy_with_the_guided_form(ada, kind, preset, name)
        # the gateway reads new models every GATEWAY_CATALOG_TTL_SECONDS on the demo's SQLite (docs/gateway.md)
        wait_until(lambda model=model: model in {entry.id for entry in client.models.list()},
                   f"the gateway lists {model}")
        says(client, model, f"does the guided {kind} answer")
    ada.context.close()
    admin = sign_in_with_password(browser, demo)
    kubeai_replicas_are_the_clusters(admin, demo)
    admin.context.close()

    ada_key = demo.command("shell", "-c", "from django.contrib.auth.models import User; "
                           "from accounts.tokens import issue_token; "
                           "print(issue_token(User.objects.get(username='ada'), 'journey', days=1)[1])")
    hit_a_team_limit(demo, ada_key)
    usage_and_gpu_hours(browser, demo)

    # Decisions about the demo cluster; Ctrl-C; a second start finds them, and every grant and limit.
    cluster_id, first_url = demo.command("shell", "-c", DECIDE).split()
    assert all(listening(each) for each in demo.ports)
    demo.interrupt()
    demo.start()
    every_team_shows_its_grant(browser, demo)
    admin = sign_in_with_password(browser, demo)
    admin.goto("/teams/ml-research/usage/")
    limit = admin.locator("#limits tbody tr").first
    expect(limit.locator("td").nth(0)).to_have_text("every model")
    expect(limit.locator("td").nth(1)).to_have_text("2")
    admin.context.close()
    kept = json.loads(demo.command("shell", "-c", KEPT))
    cluster = int(cluster_id)
    assert kept["cluster"][0] == cluster and kept["cluster"][1] != first_url  # same row, the new control plane
    assert kept["grant"] == [cluster, "default"]
    assert kept["quota"] == [cluster, 2**30, 2**29]
    assert kept["shared"] == [[[cluster, "ml-platform"]], [[cluster, "api.example.com"]]]
    assert kept["team-wide"] == [7, "3.0000", "restarters"]
    assert kept["models in the grant"] > 0  # the team sees the restarted cluster's models
    demo.terminate()
