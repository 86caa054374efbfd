"""Managed InferenceModels through the gateway, on the real control plane (kube-apiserver, the
Deployment controller and kwok running the pods): wake from zero with a dependency, one wake for
concurrent requests, a 503 with the reason when the wake cannot finish, the last request stamped
on the Deployment and the controller's cooldown measured from it."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import openai
import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from accounts.models import NamespaceGrant, Team
from accounts.tokens import issue_token
from clusters.kube.conditions import rfc3339
from clusters.models import AuditEntry
from inference_gateway.last_request import stamp
from inference_gateway.models import BackendHost
from inference_gateway.routes import route_for
from models_app.controller import ready_replicas
from models_app.models import LAST_REQUEST_ANNOTATION, InferenceModel
from scheduler.models import MemoryReservation, NodePool
from scheduler.public import NEVER_FITS
from tests.clusters.conftest import sample_manifest, wait_for
from tests.gateway.conftest import metrics_text, sample_value
from tests.gateway.test_load_balancing import SERVICE_PORT, host_address, list_replica, publish_service

GIB = 1024**3


@pytest.fixture
def managed(transactional_db, kube, gateway_settings):
    kube.name = "managed"
    cluster = kube.register(managed_kinds=["InferenceModel"])
    NodePool.objects.create(cluster=cluster, name="gpu-a100", allocatable_bytes=160 * GIB)
    return kube, cluster


@pytest.fixture
def key(managed, make_user) -> str:
    """A portal API token of a user whose team owns the test's namespace."""
    kube, cluster = managed
    team = Team.objects.create(name="owners")
    NamespaceGrant.objects.create(team=team, cluster=cluster, namespace=kube.namespace)
    _, key = issue_token(make_user("owner", teams=[team]), "gateway")
    return key


def write_model(kube, file_name: str, asleep: bool, **spec) -> dict:
    """The sample, its backend replaced; ``asleep``: last requested an hour ago (past any cooldown)."""
    manifest = sample_manifest(file_name)
    manifest["spec"].update(spec)
    if asleep:
        stamped = rfc3339(timezone.now() - timedelta(hours=1))
        manifest["metadata"].setdefault("annotations", {})[LAST_REQUEST_ANNOTATION] = stamped
    return kube.write(manifest)


def deployment(kube, name: str) -> dict | None:
    return kube.get("apps/v1", "Deployment", name)


def chat(client: openai.OpenAI, model: str):
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": "wake up"}])


def test_a_request_wakes_the_model_and_its_dependency_from_zero(managed, key, gateway, start_backend) -> None:
    kube, _ = managed
    backend = start_backend("codellama")
    write_model(kube, "inferencemodel-tokenizer-service.yaml", asleep=True)
    write_model(kube, "inferencemodel-codellama-34b.yaml", asleep=True, backendUrl=backend.url)
    kube.sync()
    assert deployment(kube, "codellama-34b")["spec"]["replicas"] == 0
    assert deployment(kube, "tokenizer-service")["spec"]["replicas"] == 0

    answer = chat(gateway.client(key, timeout=90), "codellama-34b-instruct")

    assert answer.choices[0].message.content == "wake up"
    assert ready_replicas(deployment(kube, "tokenizer-service")) == 1
    assert ready_replicas(deployment(kube, "codellama-34b")) == 1
    model = InferenceModel.objects.get(name="codellama-34b")
    assert model.ready and model.status["conditions"][0]["reason"] == "Deployed"
    woken = AuditEntry.objects.filter(message__startswith="woken").values_list("name", "actor_label")
    assert sorted(woken) == [("codellama-34b", "owner (gateway)"), ("tokenizer-service", "owner (gateway)")]
    # The wake is audited once, above; the last-request stamp it wrote, mirrored back, is not (nor
    # the gateway's later stamps on the Deployment): the log keeps decisions, not bookkeeping.
    kube.sync()
    asked = parse_datetime(InferenceModel.objects.get(name="codellama-34b").annotations[LAST_REQUEST_ANNOTATION])
    assert asked > timezone.now() - timedelta(minutes=5)  # the wake's stamp reached the row
    stamps = [entry for entry in AuditEntry.objects.all()
              if any(LAST_REQUEST_ANNOTATION in change["path"] for change in entry.changes)]
    assert stamps == []


def test_concurrent_requests_for_a_sleeping_model_share_one_wake(managed, key, gateway, start_backend) -> None:
    kube, _ = managed
    backend = start_backend("llama")
    write_model(kube, "inferencemodel-llama-2-7b.yaml", asleep=True, backendUrl=backend.url)
    kube.sync()
    client = gateway.client(key, timeout=90)
    answers, errors = [], []

    def call() -> None:
        try:
            answers.append(chat(client, "llama-2-7b"))
        except Exception as error:  # the assertion below shows it
            errors.append(error)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(answers) == 8
    chat(client, "llama-2-7b")  # right after: the catalog may still show it at zero; no second wake
    assert AuditEntry.objects.filter(name="llama-2-7b", message__startswith="woken").count() == 1
    assert backend.stats()["/v1/chat/completions"] == 9


def test_a_request_held_through_a_wake_waits_for_its_service_to_list_a_replica(managed, key, gateway,
                                                                                start_backend) -> None:
    """The controller calls a model woken when its Deployment has a ready Pod; the EndpointSlice
    that lists the Pod comes from another controller, later on a busy control plane. Here the
    model's Service has no selector and its one replica is listed only once the gateway has looked
    after the wake and found none: the request waits for it and is answered (it was a 502)."""
    kube, cluster = managed
    host = host_address()
    BackendHost.objects.create(cluster=cluster, host=host)  # the replica is no Pod: staff allow its address
    backend = start_backend("late", host=host)
    publish_service(kube, "late")
    write_model(kube, "inferencemodel-llama-2-7b.yaml", asleep=True,
                backendUrl=f"http://late.{kube.namespace}.svc.cluster.local:{SERVICE_PORT}")
    kube.sync()
    answers: list = []

    def call() -> None:
        try:
            answers.append(chat(gateway.client(key, timeout=90), "llama-2-7b"))
        except openai.APIError as error:
            answers.append(error)

    held = threading.Thread(target=call)
    held.start()
    waits = "inference_portal_gateway_replica_waits_total"
    model = f"{kube.namespace}/llama-2-7b"
    wait_for(lambda: answers or sample_value(metrics_text(gateway), waits, model=model) == 1, timeout=90,
             message="the gateway to wait for the woken model's replica")
    assert not answers, f"answered before any replica was listed: {answers}"
    assert deployment(kube, "llama-2-7b")["spec"]["replicas"] == 1

    list_replica(kube, "late", backend)
    held.join(timeout=90)

    assert answers[0].choices[0].message.content == "wake up"
    assert backend.stats()["/v1/chat/completions"] == 1


@pytest.fixture
def short_wake(gateway_settings) -> float:
    gateway_settings.GATEWAY_WAKE_TIMEOUT_SECONDS = 3
    return 3


def test_a_serving_model_whose_service_lists_no_replica_is_a_503_after_the_wake_deadline(
        managed, short_wake, key, gateway) -> None:
    """The model is up (its Deployment's Pod ready), but its Service lists no replica and never
    will: the request waits the wake's time for one, then answers 503 to retry, naming what it
    waited for, rather than 502 at once."""
    kube, _ = managed
    publish_service(kube, "empty")
    write_model(kube, "inferencemodel-llama-2-7b.yaml", asleep=False,
                backendUrl=f"http://empty.{kube.namespace}.svc.cluster.local:{SERVICE_PORT}")
    kube.sync()
    wait_for(lambda: ready_replicas(deployment(kube, "llama-2-7b")) == 1, timeout=90, message="llama-2-7b ready")
    kube.sync()
    assert InferenceModel.objects.get(name="llama-2-7b").ready
    started = time.monotonic()

    with pytest.raises(openai.InternalServerError) as caught:
        chat(gateway.client(key, timeout=60), "llama-2-7b")

    assert caught.value.status_code == 503 and caught.value.code == "model_not_ready"
    assert caught.value.response.headers["Retry-After"] == "30"
    assert caught.value.message == (f"Error code: 503 - model {kube.namespace}/llama-2-7b is awake but its Service "
                                    f"listed no ready replica within the wake's {short_wake} s "
                                    "(GATEWAY_WAKE_TIMEOUT_SECONDS)")
    assert time.monotonic() - started >= short_wake


def test_a_wake_that_cannot_finish_is_a_503_with_the_reason(managed, short_wake, key, gateway, start_backend) -> None:
    """The pool could hold the model once memory frees (another model's reservation holds half):
    the wake waits for its deadline, then answers 503 with Retry-After."""
    kube, cluster = managed
    pool = NodePool.objects.get(cluster=cluster)
    NodePool.objects.filter(pk=pool.pk).update(allocatable_bytes=128 * GIB)
    # a KubeAI Model starting there (a kind this cluster's controller does not manage, so no pass
    # releases it as departed)
    MemoryReservation.objects.create(pool=pool, kind="Model", namespace=kube.namespace, name="another",
                                     memory_bytes=64 * GIB)  # fmt: skip
    backend = start_backend("too-big")
    write_model(kube, "inferencemodel-llama-2-7b.yaml", asleep=True, backendUrl=backend.url, memory="90Gi",
                resources={})
    kube.sync()
    started = time.monotonic()
    with pytest.raises(openai.InternalServerError) as caught:
        chat(gateway.client(key, timeout=30), "llama-2-7b")
    assert caught.value.status_code == 503
    assert caught.value.response.headers["Retry-After"] == "30"
    assert caught.value.code == "model_not_ready"
    assert "InsufficientMemory" in caught.value.message and "gpu-a100" in caught.value.message
    assert time.monotonic() - started >= short_wake
    assert backend.stats().get("/v1/chat/completions") is None


def test_a_model_larger_than_its_whole_pool_is_refused_at_once(managed, gateway_settings, key, gateway,
                                                               start_backend) -> None:
    """90Gi in a 64Gi pool can never fit, whatever frees: the wake answers 409 at once, not after
    its deadline (here 600 s: a wait would outlast the client's 120 s and fail the test)."""
    gateway_settings.GATEWAY_WAKE_TIMEOUT_SECONDS = 600
    kube, cluster = managed
    NodePool.objects.filter(cluster=cluster).update(allocatable_bytes=64 * GIB)
    backend = start_backend("too-big")
    write_model(kube, "inferencemodel-llama-2-7b.yaml", asleep=True, backendUrl=backend.url, memory="90Gi",
                resources={})
    kube.sync()
    with pytest.raises(openai.ConflictError) as caught:
        chat(gateway.client(key, timeout=120), "llama-2-7b")
    assert caught.value.code == "wake_refused" and "Retry-After" not in caught.value.response.headers
    assert "InsufficientMemory" in caught.value.message and NEVER_FITS in caught.value.message
    assert "after waiting" not in caught.value.message
    assert backend.stats().get("/v1/chat/completions") is None


def test_cooldown_counts_from_the_last_request_through_the_gateway(managed, key, gateway, start_backend) -> None:
    kube, _ = managed
    backend = start_backend("llama")
    cooldown = timedelta(seconds=12)  # long beside what a busy machine takes between two steps below
    write_model(kube, "inferencemodel-llama-2-7b.yaml", asleep=False, backendUrl=backend.url, cooldownPeriod="12s")
    kube.sync()
    wait_for(lambda: ready_replicas(deployment(kube, "llama-2-7b")) == 1, timeout=30, message="llama-2-7b ready")
    kube.sync()
    assert InferenceModel.objects.get(name="llama-2-7b").ready
    client = gateway.client(key)
    created = timezone.now()
    while timezone.now() - created < cooldown + timedelta(seconds=1):  # requests for longer than the cooldown
        sent = timezone.now()
        chat(client, "llama-2-7b")
        answered = timezone.now()
        time.sleep(0.5)
    wait_for(
        lambda: parse_datetime(deployment(kube, "llama-2-7b")["metadata"]["annotations"][LAST_REQUEST_ANNOTATION])
        >= sent.replace(microsecond=0),
        timeout=30, message="the last request's stamp on the Deployment",
    )
    kube.sync()  # longer than the cooldown after creation, well within it after the last request: serving
    assert deployment(kube, "llama-2-7b")["spec"]["replicas"] == 1
    wait_for(lambda: timezone.now() > answered + cooldown + timedelta(seconds=1), timeout=30,
             message="the cooldown to pass")
    kube.sync()
    assert deployment(kube, "llama-2-7b")["spec"]["replicas"] == 0
    condition = InferenceModel.objects.get(name="llama-2-7b").status["conditions"][0]
    assert condition["reason"] == "ScaledToZero"
    stamped = parse_datetime(condition["message"].split("since ")[1].split(" ")[0])
    # The stamp is the last request's time, to the second: between its sending and its answer.
    assert sent.replace(microsecond=0) <= stamped <= answered


def test_the_last_request_time_never_moves_backwards(managed) -> None:
    kube, _ = managed
    write_model(kube, "inferencemodel-llama-2-7b.yaml", asleep=False)
    kube.sync()
    route = route_for(InferenceModel.objects.get(name="llama-2-7b"))
    later = timezone.now() + timedelta(minutes=2)  # past the controller's own stamp (the creation)
    assert stamp(route, later) == "stamped"
    assert stamp(route, later - timedelta(minutes=1)) == "newer already"
    annotation = deployment(kube, "llama-2-7b")["metadata"]["annotations"][LAST_REQUEST_ANNOTATION]
    assert annotation == rfc3339(later)
