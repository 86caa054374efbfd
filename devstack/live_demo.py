"""The live demo behind ``make run``: the portal on a real local Kubernetes control plane.

Started by ``manage.py run_demo`` when the control plane can be built (Go is installed):

1. the tests' control plane (``devstack.control_plane``: etcd, kube-apiserver, controller-manager,
   scheduler, kwok nodes with GPUs), with the portal's CRDs;
2. simulated engines (``manage.py sim_engine``, devstack/sim_engine.py): one every InferenceModel
   points at, ``SERVING_ENGINES`` behind the ModelServices' Services (:func:`serving_services`) and
   behind each KubeAI Model's Service while it has a Pod, and one for each Pod of a KubeAI Model
   that scales past one replica (devstack/pod_engines.py), so every demo model answers through the
   gateway;
3. the cluster ``local`` registered with the portal managing InferenceModel, InferenceRun and KubeAI's
   Model (a
   previous run's ``local`` row is kept and pointed at the new control plane, so every grant,
   quota, budget and other decision attached to it survives; only the mirror of its gone etcd is
   dropped), its node pools read from the Nodes (updated in place: budgets and quotas kept);
4. the reference samples applied to the cluster as ``kubectl apply`` would (the InferenceModels
   at zero, last asked for a day ago, so the first request wakes them; the mirrored kinds with the
   statuses their controllers would write), then one ``sync --once`` and the right-sizing demo week;
5. single sign-on, when the project's OpenID provider is built (tools/oidc-provider): it runs with
   two demo people whose groups map to two demo teams (``SSO_TEAMS``, ``SSO_PEOPLE``), and the
   portal and gateway are configured for it;
6. the watcher (``sync_watch``), the gateway (``GATEWAY_ALLOW_LOOPBACK=1``, as the backend is on
   loopback), KubeAI's autoscaler (``autoscale``, at ``AUTOSCALING``) and the portal
   (``runserver``), each its own process; Celery runs in-process (eager,
   as in the embedded default) and this process runs the periodic reconcile pass and the GPU
   sampling (what beat runs on a deployment).

Ctrl-C (SIGINT) or SIGTERM stops every process it started, children first, then the control
plane, and removes the control plane's data. Every child dies with this process even if it is
killed (``PR_SET_PDEATHSIG``), so nothing is left behind.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TextIO

import kubernetes
import requests
import yaml
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken, GroupMapping, NamespaceGrant, Team
from accounts.public import issue_token
from clusters.kinds import all_models, model_for
from clusters.kube.conditions import rfc3339
from clusters.management.commands.ensure_demo_admin import demo_password
from clusters.models import Cluster
from common.child_processes import die_with_parent
from devstack.control_plane import (
    ADMIN_TOKEN,
    SAY_EVERY_SECONDS,
    ControlPlane,
    Process,
    apply_crds_to,
    stop_together,
)
from devstack.gitops_demo import GitOpsDemo, start_gitops_demo
from devstack.oidc_provider import OidcProvider, ProviderUnavailable, build_binary
from devstack.pod_engines import PodEngines, engine_slice
from devstack.ports import free_port
from models_app.models import LAST_REQUEST_ANNOTATION, InferenceModel
from scheduler.models import MemoryReservation

CLUSTER = "local"
MANAGED = ["InferenceModel", "InferenceRun", "Model"]
TOKEN_NAME = "live demo"
PASS_SECONDS = 10.0  # the periodic reconcile pass (cooldowns, budgets); the watcher acts within a second
SAMPLE_SECONDS = 60  # GPU holdings sampled this often for GPU-hours (beat's USAGE_SAMPLE_SECONDS elsewhere)
DEMO_MODEL = "mistral-7b"
SERVING_ENGINES = 3  # replicas behind the ModelServices' Services: the gateway picks among them
# The simulated engines run ten times faster than the Llama 3.1 8B on an H100 they model, with a KV
# cache small enough that a shared-prefix conversation shows hits and misses on the model page.
ENGINE_OPTIONS = ["--time-scale", "0.1", "--num-blocks", "2000", "--max-loras", "2"]
# A KubeAI Model's Pods' engines run at the H100's own speed: the load that makes KubeAI's autoscaler
# act is tens of requests in flight (targetRequests 32 in the demo's PrefixHash Model), and each
# sequence's tokens cost this machine CPU ten times as often at a tenth of the time.
POD_ENGINE_OPTIONS = ["--num-blocks", "2000", "--max-loras", "2"]
# KubeAI's autoscaler reads every 10 s over a 10 min window; the demo reads every 5 s over 20 s, so
# that load sent by hand moves the replicas within seconds (docs/demo.md, "Send load"). Every 2 s
# it read every Model (its object, its engines, its Service's slices) as often as the gateway's
# picker, which a demo needs no more than KubeAI does: on a loaded machine it was CPU the journey's
# other steps waited for.
AUTOSCALING = {"KUBEAI_AUTOSCALING_INTERVAL": "5", "KUBEAI_AUTOSCALING_WINDOW": "20"}
# Where the gateway reaches ModelServices (inference_gateway/routes.py, docs/gateway.md)
MODEL_SERVICE_PORT = 8000
# Single sign-on in the demo (docs/identity.md): the project's own OpenID provider with two people,
# whose provider groups map to two teams, each editing one namespace of the local cluster.
SSO_PROVIDER_NAME = "the demo provider"
SSO_TEAMS = {  # team -> (its provider group, the namespace of `local` it edits)
    "ml-research": ("demo-ml-research", "default"),
    "batch-inference": ("demo-batch-inference", "kserve-controller-system"),
}
SSO_PEOPLE = (  # (subject, user name, password, groups)
    ("demo-ada", "ada", "ada-demo-password", ["demo-ml-research"]),
    ("demo-grace", "grace", "grace-demo-password", ["demo-batch-inference"]),
)
SSO_ROLE = "ML team member"  # accounts' ready-made role: the kinds a member may edit
GITOPS_NAMESPACE = SSO_TEAMS["batch-inference"][1]  # `make run GITOPS=1`: the namespace run from Git


class Stopped(Exception):
    """Ctrl-C (or SIGTERM) came while the demo was starting."""


@dataclass
class Endpoints:
    host: str
    port: int
    gateway_port: int

    @property
    def portal(self) -> str:
        return f"http://{self.host}:{self.port}/"

    @property
    def gateway(self) -> str:
        return f"http://{self.host}:{self.gateway_port}"


def register_cluster(plane: ControlPlane) -> Cluster:
    """The ``local`` cluster, pointed at this start's control plane: the same row at every start.

    Its primary key is what people's decisions hang on (namespace grants, node pools with their
    budgets and team quotas, shared namespaces, backend hosts, shared gateway ids, the audit log),
    so the row is updated in place, never replaced: deleting it cascaded every team's grants away
    and a restarted demo showed each team 0 models (issue 43). What described the previous start's
    etcd, which is gone with its folder, is forgotten (:func:`forget_previous_control_plane`)."""
    with transaction.atomic():
        cluster, created = Cluster.objects.update_or_create(name=CLUSTER, defaults={
            "auth_method": Cluster.AuthMethod.TOKEN, "server_url": plane.url, "bearer_token": ADMIN_TOKEN,
            "ca_cert": plane.ca_pem, "kubeconfig_path": "", "kubeconfig_context": "", "managed_kinds": MANAGED,
            "description": "The live demo's local control plane (make run): a new one at every start, "
                           "this row and what hangs on it kept.",
            "healthy": None, "last_error": "", "missing_kinds": [], "last_full_resync_at": None,
        })
        if not created:
            forget_previous_control_plane(cluster)
    return cluster


def forget_previous_control_plane(cluster: Cluster) -> None:
    """Drop the rows that mirrored the previous start's objects and the memory admission promised
    its models: that etcd is gone, and this start applies the demo objects anew (new uids), so the
    old rows would only come back as "deleted in the cluster" or as conflicts with their namesakes.
    What people decided about the cluster is kept (the row's docstring above says what)."""
    for model in all_models():
        model.objects.filter(cluster=cluster).delete()
    MemoryReservation.objects.filter(pool__cluster=cluster).delete()


def demo_manifests(backend_url: str, now: Any) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """The reference samples as the demo applies them, each with the status its controller would
    report (None for the kinds the portal controls here: it writes their status itself)."""
    statuses = yaml.safe_load((Path(settings.DEMO_DIR) / "statuses.yaml").read_text()) or {}
    manifests = []
    for path in sorted(Path(settings.SAMPLES_DIR).glob("*.yaml")):
        manifest = yaml.safe_load(path.read_text())
        metadata = manifest["metadata"]
        metadata.setdefault("namespace", "default")
        kind = manifest["kind"]
        if kind == InferenceModel.kube.kind:
            manifest["spec"]["backendUrl"] = backend_url
            metadata.setdefault("annotations", {})[LAST_REQUEST_ANNOTATION] = rfc3339(now - timedelta(days=1))
        status = None if kind in MANAGED else statuses.get(f"{kind} {metadata['namespace']}/{metadata['name']}")
        manifests.append((manifest, status))
    return manifests


def demo_namespaces(manifests: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> list[str]:
    """The namespaces the demo makes: those of its objects and every one its teams are granted
    (``SSO_TEAMS``), which the guided deploy offers them (models_app/deploy.py)."""
    return sorted({m["metadata"]["namespace"] for m, _ in manifests} | {ns for _, ns in SSO_TEAMS.values()})


def serving_services(manifests: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> dict[tuple[str, str], int]:
    """(namespace, Service) -> port of each Service the gateway reaches the demo's mirrored kinds
    through (``inference_gateway.routes``): one named after each ModelService on its
    ``spec.engine.port``. KubeAI Models need none: the portal is their controller here, and renders
    each one's Service ``model-<name>``, whose Pods get engines (devstack/pod_engines.py) in any
    namespace, a guided deploy's included."""
    services = {}
    for manifest, _ in manifests:
        namespace, kind = manifest["metadata"]["namespace"], manifest["kind"]
        if kind == "ModelService":
            port = (manifest["spec"].get("engine") or {}).get("port") or MODEL_SERVICE_PORT
            services[(namespace, manifest["metadata"]["name"])] = port
    return services


def publish_engines(api_client: Any, services: dict[tuple[str, str], int], engine_ports: list[int]) -> None:
    """Each Service without a selector, and one FQDN EndpointSlice per engine naming
    ``engine-N.localhost`` on the engine's port. With kwok no pod runs, so the Services list the
    engines on this machine instead: kube-apiserver refuses loopback IPs in an EndpointSlice (and a
    name of one label), but takes a name under ``localhost``, which the gateway resolves to loopback
    (RFC 6761, inference_gateway/resolver.py) and follows only with ``GATEWAY_ALLOW_LOOPBACK``, the
    demo's development setting (inference_gateway/endpoints.py), never on a real cluster's gateway."""
    core, discovery = kubernetes.client.CoreV1Api(api_client), kubernetes.client.DiscoveryV1Api(api_client)
    for (namespace, name), port in sorted(services.items()):
        core.create_namespaced_service(namespace, {"metadata": {"name": name},
                                                   "spec": {"ports": [{"name": "http", "port": port}]}})
        for index, (address, engine_port) in enumerate(shared_engines(engine_ports)):
            discovery.create_namespaced_endpoint_slice(
                namespace, engine_slice(f"{name}-engine-{index}", name, address, engine_port))


def shared_engines(engine_ports: list[int]) -> list[tuple[str, int]]:
    """(address, port) of the ``SERVING_ENGINES``: ``engine-N.localhost`` on each one's port."""
    return [(f"engine-{index}.localhost", port) for index, port in enumerate(engine_ports)]


def priority_classes(manifests: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> list[str]:
    """The PriorityClasses the demo's objects name (``spec.priorityClassName``): they must exist before
    the objects' Pods, which the API server refuses otherwise, as a cluster's admin would have made them."""
    return sorted({name for manifest, _ in manifests if (name := manifest.get("spec", {}).get("priorityClassName"))})


def apply_demo_objects(plane: ControlPlane, backend_url: str, engine_ports: list[int] | None = None) -> int:
    """Create the demo's namespaces, PriorityClasses and objects in the cluster, as another writer would."""
    manifests = demo_manifests(backend_url, timezone.now())
    with plane.api_client() as api_client:
        core, custom = kubernetes.client.CoreV1Api(api_client), kubernetes.client.CustomObjectsApi(api_client)
        existing = {item.metadata.name for item in core.list_namespace().items}
        for namespace in [namespace for namespace in demo_namespaces(manifests) if namespace not in existing]:
            core.create_namespace({"metadata": {"name": namespace}})
        for name in priority_classes(manifests):
            kubernetes.client.SchedulingV1Api(api_client).create_priority_class(
                {"metadata": {"name": name}, "value": 1000, "description": "the live demo's: a sample names it"})
        for manifest, status in manifests:
            kind = model_for(manifest["apiVersion"], manifest["kind"]).kube
            namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
            custom.create_namespaced_custom_object(kind.group, kind.version, namespace, kind.plural, manifest)
            if status:
                custom.patch_namespaced_custom_object_status(kind.group, kind.version, namespace, kind.plural, name,
                                                             {"status": status})
        if engine_ports:
            publish_engines(api_client, serving_services(manifests), engine_ports)
    return len(manifests)


def demo_token() -> tuple[str, str]:
    """The admin (created once, password kept) and a fresh one-day API token for the printed ``curl``."""
    call_command("ensure_demo_admin", stdout=io.StringIO())
    admin = User.objects.get(username="admin")
    ApiToken.objects.filter(user=admin, name=TOKEN_NAME).delete()
    _, key = issue_token(admin, TOKEN_NAME, days=1)
    return demo_password(), key


def sso_teams(cluster: Cluster) -> None:
    """The demo teams, their grants on ``cluster`` and the group mappings that make the demo people
    members (with the role ``SSO_ROLE``) at their sign-in; kept from start to start."""
    role = Group.objects.filter(name=SSO_ROLE).first()
    with transaction.atomic():
        for name, (group, namespace) in SSO_TEAMS.items():
            team, _ = Team.objects.get_or_create(name=name, defaults={"description": "make run's single sign-on demo"})
            NamespaceGrant.objects.get_or_create(team=team, cluster=cluster, namespace=namespace)
            GroupMapping.objects.update_or_create(group=group, team=team, defaults={"role": role})


def start_sso(cluster: Cluster, portal_url: str, workdir: Path, say: Callable[[str], None]) -> OidcProvider | None:
    """The project's OpenID provider (tools/oidc-provider) with the demo people, when it is built
    (the demo spends no build on it); None, said with how to build it, when not."""
    try:
        binary = build_binary(cached_only=True)
    except ProviderUnavailable as reason:
        say(f"Single sign-on: off ({reason}); the next `make run` starts it (docs/identity.md).")
        return None
    sso_teams(cluster)
    folder = workdir / "oidc-provider"
    folder.mkdir(exist_ok=True)
    provider = OidcProvider(workdir=folder, redirect_uris=[f"{portal_url}oidc/callback/"], access_token_ttl="1h",
                            name=SSO_PROVIDER_NAME)
    for subject, username, password, groups in SSO_PEOPLE:
        provider.add_user(subject, username, password, groups)
    provider.start(binary)
    return provider


def sso_lines(provider: OidcProvider | None) -> list[str]:
    """The banner's lines on single sign-on: who may sign in, and what each sees."""
    if provider is None:
        return []
    people = [f"{username} / {password} (team {team}: namespace {SSO_TEAMS[team][1]})"
              for _, username, password, groups in SSO_PEOPLE
              for team, (group, _) in SSO_TEAMS.items() if group in groups]
    return [f"  Single sign-on: \"Sign in with {SSO_PROVIDER_NAME}\" on the login page ({provider.issuer}) as",
            *(f"    {person}" for person in people)]


def banner(endpoints: Endpoints, password: str, token: str, plane: ControlPlane,
           provider: OidcProvider | None = None) -> str:
    body = json.dumps({"model": DEMO_MODEL, "messages": [{"role": "user", "content": "Hello from the live demo"}]})
    return "\n".join([
        "",
        f"Inference Portal, live on a local Kubernetes control plane (started in {plane.started_in_s:.0f} s)",
        f"  Portal:   {endpoints.portal}   (username admin, password {password})",
        f"  Gateway:  {endpoints.gateway}/v1   (OpenAI-compatible; models start at zero and wake on a request)",
        "  Try:",
        f"    curl -s {endpoints.gateway}/v1/chat/completions -H 'Authorization: Bearer {token}' \\",
        f"      -H 'Content-Type: application/json' -d '{body}'",
        f"  kubectl:  KUBECONFIG={plane.kubeconfig} kubectl get pods -A",
        *sso_lines(provider),
        "Ctrl-C stops everything.",
        "",
    ])


class LiveDemo:
    """Start everything, wait for Ctrl-C (or a part that dies), stop everything."""

    def __init__(self, endpoints: Endpoints, binaries: Path, out: TextIO, gitops: bool = False) -> None:
        self.endpoints, self.out = endpoints, out
        self.stop = threading.Event()
        self.children: list[Process] = []
        self.sso: OidcProvider | None = None
        self.with_gitops = gitops  # `make run GITOPS=1`: Gitea and Flux beside the cluster (devstack/gitops_demo.py)
        self.gitops: GitOpsDemo | None = None
        self.pod_engines: PodEngines | None = None
        self.workdir = Path(tempfile.mkdtemp(prefix="inference-portal-live-"))
        self.plane = ControlPlane(workdir=self.workdir, binaries=binaries, say=self.say)
        # GATEWAY_PUBLIC_URL: the model pages' snippets name the gateway this demo started.
        self.env = {**os.environ, "GATEWAY_ALLOW_LOOPBACK": "1", "PYTHONUNBUFFERED": "1",
                    "GATEWAY_PUBLIC_URL": endpoints.gateway}

    def say(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def run(self) -> int:
        """Runs until stopped; the exit status is 0 after Ctrl-C, 1 when a part died or could not
        start (said in a sentence with the part's last output, not a traceback)."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop.set())
        try:
            return self._run()
        except Stopped:
            self.say("Stopping...")
            return 0
        except (RuntimeError, OSError) as error:
            self.say(f"The live demo could not start: {error}\nThe parts' logs: {self.workdir}")
            return 1
        finally:
            self.shutdown()

    def _run(self) -> int:
        self.say("Starting the local control plane...")
        self.plane.start(prepare=apply_crds_to)
        backend_port = free_port()
        self._start("engine", ["sim_engine", "--host", "127.0.0.1", "--port", str(backend_port),
                               "--name", "demo-engine", *ENGINE_OPTIONS])
        engine_ports = [free_port() for _ in range(SERVING_ENGINES)]
        for index, port in enumerate(engine_ports):
            self._start(f"engine-{index}", ["sim_engine", "--host", "127.0.0.1", "--port", str(port),
                                            "--name", f"engine-{index}", *ENGINE_OPTIONS])
        for port in [backend_port, *engine_ports]:
            self._wait_serving(f"http://127.0.0.1:{port}/health", f"the engine on port {port}")
        cluster = register_cluster(self.plane)
        from scheduler.public import refresh_node_pools  # the planner's view of the kwok nodes

        refresh_node_pools(cluster)
        count = apply_demo_objects(self.plane, f"http://127.0.0.1:{backend_port}", engine_ports)
        self.pod_engines = PodEngines(self.plane.api_client(), lambda name, port: self._spawn(
            name, ["sim_engine", "--host", "127.0.0.1", "--port", str(port), "--name", name, *POD_ENGINE_OPTIONS]),
            shared_engines(engine_ports))
        self.pod_engines.start()
        # the guided deploy offers the engine as a new InferenceModel's backend (models_app/deploy.py)
        self.env["DEPLOY_BACKEND_URL"] = f"http://127.0.0.1:{backend_port}"
        call_command("sync", "--once", "--cluster", CLUSTER, stdout=io.StringIO())
        call_command("load_demo_observations", cluster=CLUSTER, stdout=io.StringIO())
        self.say(f"Cluster {CLUSTER}: {count} demo objects applied and synced.")
        password, token = demo_token()
        self.sso = start_sso(cluster, self.endpoints.portal, self.workdir, self.say)
        if self.sso is not None:  # the portal and the gateway (its access tokens) use it
            self.env.update(self.sso.environment())
        if self.with_gitops:
            self.gitops = start_gitops_demo(self.plane, CLUSTER, GITOPS_NAMESPACE, self.workdir, self.say)
            self._run_namespace_from_git(cluster)
        self._start("watcher", ["sync_watch", "--cluster", CLUSTER])
        self._start("gateway", ["gateway", "--host", self.endpoints.host, "--port", str(self.endpoints.gateway_port)])
        self._start("autoscaler", ["autoscale"], AUTOSCALING)
        self._start("portal", ["runserver", "--noreload", f"{self.endpoints.host}:{self.endpoints.port}"])
        self._wait_serving(f"{self.endpoints.gateway}/healthz", "the gateway")
        self._wait_serving(f"{self.endpoints.portal}healthz", "the portal")
        threading.Thread(target=self._periodic_passes, name="reconcile passes", daemon=True).start()
        if self.gitops is not None:
            self.say("\n".join(self.gitops.lines()))
        self.say(banner(self.endpoints, password, token, self.plane, self.sso))
        while not self.stop.wait(1.0):
            parts = [*self.children, *self.plane.processes, *(self.gitops.processes if self.gitops else [])]
            dead = [child for child in parts if not child.alive()]
            if dead:
                self.say(f"{dead[0].name} exited; stopping. Its last output:\n{dead[0].tail()}")
                return 1
        self.say("Stopping...")
        return 0

    def _start(self, name: str, arguments: list[str], env: dict[str, str] | None = None) -> Process:
        """A part of the demo: its exit stops the demo."""
        child = self._spawn(name, arguments, env)
        self.children.append(child)
        return child

    def _spawn(self, name: str, arguments: list[str], env: dict[str, str] | None = None) -> Process:
        """``manage.py <arguments>`` with the demo's environment (and ``env``), its output in the
        demo's folder; it dies with this process."""
        log = self.workdir / f"{name}.log"
        popen = subprocess.Popen(
            [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), *arguments], cwd=settings.BASE_DIR,
            env={**self.env, **(env or {})}, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=die_with_parent,
        )
        return Process(name, popen, log)

    def _wait_serving(self, url: str, what: str) -> None:
        def serving() -> bool:
            try:
                return requests.get(url, timeout=2).status_code < 500
            except requests.RequestException:
                return False

        self._wait(serving, what)

    def _wait(self, condition: Callable[[], bool], what: str) -> None:
        """Until ``condition()``, for as long as every part lives: a part that exits ends the wait
        with its last output, Ctrl-C with :class:`Stopped`; every ``SAY_EVERY_SECONDS`` it says
        what it waits for. No deadline: on a loaded machine a part takes minutes to answer (a fixed
        60 s ended the demo with a traceback at load 11-16, issue 43)."""
        began = said = time.monotonic()
        while not condition():
            dead = next((child for child in self.children if not child.alive()), None)
            if dead is not None:
                raise RuntimeError(f"{dead.name} exited while waiting for {what}; its last output:\n{dead.tail()}")
            if self.stop.wait(0.2):
                raise Stopped
            if time.monotonic() - said >= SAY_EVERY_SECONDS:
                said = time.monotonic()
                self.say(f"  still waiting for {what} ({said - began:.0f} s; load {os.getloadavg()[0]:.1f})")

    def _run_namespace_from_git(self, cluster) -> None:
        """Put GITOPS_NAMESPACE in ``git`` mode against the demo's Gitea repository (docs/gitops.md):
        every edit there becomes a pull request, which Flux applies once merged. Kept across
        restarts as every other decision is (update, not replace)."""
        from gitops.models import ChangeMode

        ChangeMode.objects.update_or_create(
            cluster=cluster, namespace=GITOPS_NAMESPACE,
            defaults={"mode": ChangeMode.Mode.GIT, "forge": ChangeMode.Forge.GITEA,
                      "repository_url": self.gitops.repository_url, "token": self.gitops.gitea.token,
                      "allow_insecure_http": True},
        )  # fmt: skip
        self.say(f"GitOps: namespace {GITOPS_NAMESPACE} is in git mode: its edits open pull requests.")

    def _periodic_passes(self) -> None:
        """What Celery beat runs on a deployment (``reconcile_managed_clusters`` every
        POLLING_INTERVAL): cooldowns scale idle models to zero, waiting models are admitted; and
        every ``SAMPLE_SECONDS`` the GPU sample (``sample_gpu_holdings``), without which the demo's
        GPU-hours stayed 0 however many GPUs its models held (no beat runs here); with GITOPS=1,
        pull requests followed every pass and drift checked with the sample."""
        from django.db import connection

        from clusters.sync.tasks import reconcile_managed_clusters
        from gitops.public import check_drift, follow_pull_requests
        from governance.public import sample_gpu_holdings

        sampled_at = time.monotonic()
        while not self.stop.wait(PASS_SECONDS):
            try:
                reconcile_managed_clusters()
                if time.monotonic() - sampled_at >= SAMPLE_SECONDS:
                    sampled_at = time.monotonic()
                    sample_gpu_holdings(SAMPLE_SECONDS)
                    if self.gitops is not None:
                        check_drift()
                if self.gitops is not None:  # beat's follow_pull_requests_task, each pass
                    follow_pull_requests()
            except Exception as error:  # a pass that failed is retried next time, as beat would
                self.say(f"reconcile pass failed: {error}")
            finally:
                connection.close()

    def shutdown(self) -> None:
        """Children first (they talk to the cluster), then the control plane; then its data."""
        self.stop.set()
        if self.pod_engines is not None:
            self.pod_engines.stop()
        stop_together(self.children)
        if self.sso is not None:
            self.sso.stop()
        if self.gitops is not None:
            self.gitops.stop()
        self.plane.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)
