"""The portal as KubeAI ``Model`` controller (reference 002, issue 42), on the real control plane:
the Deployment controller and kwok run the pods; simulated vLLM engines (devstack/sim_engine.py)
stand for them where requests are served, behind hand-written EndpointSlices of the Model's
Service (kube-apiserver refuses loopback addresses there, so they listen on this machine's own
address, which staff put on the cluster's backend allow-list, as tests/gateway/test_load_balancing.py
explains)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import requests

from accounts.models import NamespaceGrant, Team
from accounts.tokens import issue_token
from clusters.models import AuditEntry
from clusters.sync.audit import Actor
from inference_gateway.autoscaler import Autoscaler, _read, desired_replicas
from inference_gateway.models import BackendHost
from models_app.controller import ready_replicas
from models_app.kubeai_controller import DNS_LABEL, PORT, service_name
from models_app.models import KubeAIModel
from models_app.wake import wake
from scheduler.models import NodePool, TeamQuota
from scheduler.refresh import refresh_node_pools
from tests.clusters.conftest import wait_for
from tests.gateway.conftest import gateway as gateway_fixture
from tests.gateway.conftest import gateway_settings  # noqa: F401 (the fixture gateway_fixture uses)
from tests.gateway.test_load_balancing import host_address
from tests.support.sim_engines import Engine, list_behind, start_engine_fixture  # noqa: F401 (the start_engine fixture)

KIND = KubeAIModel.kube
running_gateway = gateway_fixture
GI = 1024**3
POOL = "gpu-a100"  # the session's kwok pool: 2 nodes x 4 GPUs (devstack/control_plane.NODE_POOLS)
PROFILES = {  # shaped like KubeAI's own resourceProfiles (its helm chart's values)
    "a100-test": {
        "limits": {"nvidia.com/gpu": "1"},
        "requests": {"nvidia.com/gpu": "1", "cpu": "500m", "memory": "10Gi"},
        "nodeSelector": {"inference-pool": POOL},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    },
    "small": {"requests": {"cpu": "100m", "memory": "256Mi"}},
}


@pytest.mark.parametrize(("name", "child"), [
    ("qwen", "model-qwen"),
    ("llama-3.1-8b-instruct-fp8-l4", "model-llama-3-1-8b-instruct-fp8-l4-5b6ce6f8"),  # KubeAI's catalog has dots
    ("llama-3-1-8b-instruct-fp8-l4", "model-llama-3-1-8b-instruct-fp8-l4"),  # stays apart from the dotted one
])
def test_the_models_service_name_is_one_a_service_may_have(name: str, child: str) -> None:
    assert service_name(name) == child and DNS_LABEL.fullmatch(child)


def test_a_long_models_service_names_are_shortened_apart() -> None:
    first, second = service_name("a" * 80 + "1"), service_name("a" * 80 + "2")
    assert len(first) == len(second) == 63 and first != second and DNS_LABEL.fullmatch(first)


def test_the_autoscaler_reads_an_engine_listed_by_a_name_under_localhost(start_engine) -> None:
    """The live demo lists engines as ``engine-N.localhost`` (loopback by RFC 6761, as the gateway's
    resolver reads them); ``requests`` on glibc resolves no such name, and the autoscaler read nothing."""
    engine = start_engine("named")
    state = _read(f"http://named.localhost:{engine.port}")
    assert state is not None and (state.running, state.waiting) == (0, 0)


@pytest.mark.parametrize(("average", "spec", "desired"), [
    (6, {"targetRequests": 2}, 3),  # each replica then averages exactly its target
    (6.5, {"targetRequests": 2}, 4),
    (0.2, {"targetRequests": 2}, 1),  # any load wants a replica
    (0, {"targetRequests": 2, "minReplicas": 0}, 0),
    (0, {"minReplicas": 2}, 2),
    (99, {"targetRequests": 10, "maxReplicas": 4}, 4),
    (250, {}, 3),  # KubeAI's default targetRequests: 100
])
def test_the_desired_replicas_are_kubeais(average: float, spec: dict, desired: int) -> None:
    assert desired_replicas(average, spec) == desired


def model(name: str = "qwen", **spec) -> dict:
    return {
        "apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": name},
        "spec": {"url": "hf://Qwen/Qwen2.5-7B-Instruct", "engine": "VLLM", "features": ["TextGeneration"],
                 "resourceProfile": "small:1", **spec},
    }  # fmt: skip


def condition(kube, name: str, type_: str) -> dict:
    return next(c for c in kube.read(KIND, name)["status"]["conditions"] if c["type"] == type_)


def deployment_replicas(kube, name: str) -> int:
    return (kube.get("apps/v1", "Deployment", f"model-{name}") or {"spec": {}})["spec"].get("replicas") or 0


@pytest.fixture
def managed_models(transactional_db, kube, settings):
    settings.KUBEAI_RESOURCE_PROFILES = PROFILES
    kube.name = "managed"
    cluster = kube.register(managed_kinds=["Model"])
    refresh_node_pools(cluster)
    return kube, cluster


def test_deployment_and_service_are_rendered_from_the_spec_and_profile(managed_models, metrics_client) -> None:
    kube, cluster = managed_models
    created = kube.write(model(resourceProfile="a100-test:2", minReplicas=1, maxReplicas=3,
                               args=["--max-model-len=8192"], env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"},
                               envFrom=[{"secretRef": {"name": "hf-token"}}]))  # fmt: skip
    kube.sync()
    deployment = kube.get("apps/v1", "Deployment", "model-qwen")
    owner = {"apiVersion": "kubeai.org/v1", "kind": "Model", "name": "qwen", "uid": created["metadata"]["uid"],
             "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    assert deployment["metadata"]["ownerReferences"] == [owner]
    assert deployment["spec"]["replicas"] == 1  # minReplicas
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["template"]["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "inference-portal", "model": "qwen"}  # fmt: skip
    (container,) = pod["containers"]
    assert container["image"] == "vllm/vllm-openai:v0.6.3.post1"
    assert container["args"] == ["--model=Qwen/Qwen2.5-7B-Instruct", "--served-model-name=qwen", f"--port={PORT}",
                                 "--max-model-len=8192"]  # fmt: skip
    assert container["env"] == [{"name": "VLLM_ATTENTION_BACKEND", "value": "FLASHINFER"}]
    assert container["envFrom"] == [{"secretRef": {"name": "hf-token"}}]
    # the profile times its count (a100-test:2)
    assert container["resources"] == {"requests": {"nvidia.com/gpu": "2", "cpu": "1", "memory": str(20 * GI)},
                                      "limits": {"nvidia.com/gpu": "2"}}  # fmt: skip
    assert pod["nodeSelector"] == {"inference-pool": POOL}
    assert [t["key"] for t in pod["tolerations"]] == ["nvidia.com/gpu"]
    service = kube.get("v1", "Service", "model-qwen")
    assert service["metadata"]["ownerReferences"] == [owner]
    assert service["spec"]["selector"] == {"model": "qwen"}
    assert [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [("http", PORT, "http")]

    wait_for(lambda: ready_replicas(kube.get("apps/v1", "Deployment", "model-qwen")) == 1, timeout=60,
             message="kwok runs the model's pod")  # fmt: skip
    kube.sync()
    status = kube.read(KIND, "qwen")["status"]
    assert status["replicas"] == {"all": 1, "ready": 1} and status["desiredReplicas"] == 1
    assert condition(kube, "qwen", "Ready")["reason"] == "Deployed"
    assert condition(kube, "qwen", "Scaling")["status"] == "True"
    series = (f'inference_portal_model_desired_replicas{{cluster="managed",kind="Model",name="qwen",'
              f'namespace="{kube.namespace}"}} 1.0')  # fmt: skip
    assert series in metrics_client.get("/metrics").content.decode()
    assert KubeAIModel.objects.get(cluster=cluster, name="qwen").ready is True


def test_an_unknown_resource_profile_is_refused_naming_the_field(managed_models, api_as) -> None:
    kube, _ = managed_models
    editor = api_as(perms=["models_app.add_kubeaimodel"])
    refused = editor.post("/api/kubeai-models/", {**model(resourceProfile="nvidia-gpu-x9:1"),
                                                 "metadata": {"name": "qwen", "namespace": kube.namespace}},
                         format="json")  # fmt: skip
    assert refused.status_code == 400
    assert refused.json()["spec.resourceProfile"] == [
        'spec.resourceProfile: "nvidia-gpu-x9:1" names no resource profile of KUBEAI_RESOURCE_PROFILES '
        '(known: a100-test, small)']
    # written past the portal (kubectl): the controller says so on the object and runs nothing
    kube.write(model(resourceProfile="nvidia-gpu-x9:1", minReplicas=1))
    kube.sync()
    ready = condition(kube, "qwen", "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Failed")
    assert ready["message"].startswith('spec.resourceProfile: "nvidia-gpu-x9:1" names no resource profile')
    assert deployment_replicas(kube, "qwen") == 0


class Load:
    """Requests held in flight on the engines, from threads, until released (each engine runs at
    most one sequence at a time, the rest wait: running + waiting is what it reports)."""

    def __init__(self, engines: list[Engine], per_engine: int) -> None:
        self.threads = [threading.Thread(target=self._send, args=(engine,), daemon=True)
                        for engine in engines for _ in range(per_engine)]  # fmt: skip
        for thread in self.threads:
            thread.start()

    @staticmethod
    def _send(engine: Engine) -> None:
        body = {"model": "qwen", "messages": [{"role": "user", "content": "count"}], "max_tokens": 400}
        requests.post(f"{engine.url}/v1/chat/completions", json=body, timeout=120)

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=120)


@pytest.fixture
def engines(managed_models, start_engine) -> Iterator[list[Engine]]:
    """Two engines behind the Model's Service, on the allow-list; 400 tokens take 2 s each."""
    kube, cluster = managed_models
    address = host_address()
    BackendHost.objects.create(cluster=cluster, host=address)
    options = ("--model", "qwen", "--max-num-seqs", "1", "--decode-ms", "5", "--decode-ms-per-seq", "0")
    started = [start_engine(f"e{index}", *options, host=address) for index in range(2)]
    list_behind(kube.api_client, kube.namespace, "model-qwen", started)
    return started


def test_a_model_scales_from_zero_on_a_request_out_with_load_and_back_to_zero_after_its_delay(
    managed_models, engines, settings
) -> None:
    """targetRequests 2, maxReplicas 3, scaleDownDelaySeconds 30; the window one interval long.
    The autoscaler is stepped through time (``now``), so the 30 s delay costs no wall time."""
    settings.KUBEAI_AUTOSCALING_INTERVAL = settings.KUBEAI_AUTOSCALING_WINDOW = 1.0
    kube, cluster = managed_models
    kube.write(model(minReplicas=0, maxReplicas=3, targetRequests=2, scaleDownDelaySeconds=30,
                     adapters=[{"name": "sql", "url": "hf://example/sql-lora"}]))  # fmt: skip
    kube.sync()
    assert condition(kube, "qwen", "Ready")["reason"] == "ScaledToZero" and deployment_replicas(kube, "qwen") == 0
    autoscaler = Autoscaler()
    try:
        assert autoscaler.step(cluster, now=0.0)["qwen"].desired == 0  # idle: stays at zero
        # the adapters went to every engine through vLLM's LoRA API
        for engine in engines:
            listed = requests.get(f"{engine.url}/v1/models", timeout=5).json()["data"]
            assert {item["id"] for item in listed if item["parent"]} == {"sql"}

        # a request held by the gateway: the gateway's wake path scales it to one replica
        row = KubeAIModel.objects.select_related("cluster").get(cluster=cluster, name="qwen")
        wake(row, Actor("tester (gateway)", AuditEntry.Source.API))
        assert kube.read(KIND, "qwen")["spec"]["replicas"] == 1 and deployment_replicas(kube, "qwen") == 1

        load = Load(engines, per_engine=3)  # 6 active: ceil(6 / 2) = 3 replicas
        wait_for(lambda: sum(e.value("vllm:num_requests_running") + e.value("vllm:num_requests_waiting")
                             for e in engines) == 6, timeout=30, message="six requests on the engines")  # fmt: skip
        decision = autoscaler.step(cluster, now=1.0)["qwen"]
        assert (decision.average, decision.desired, decision.scaled) == (6, 3, True)
        assert kube.read(KIND, "qwen")["spec"]["replicas"] == 3 and deployment_replicas(kube, "qwen") == 3
        assert kube.read(KIND, "qwen")["status"]["desiredReplicas"] == 3

        load.join()  # the load ends: 0 active; down only after 30 s of wanting fewer
        assert autoscaler.step(cluster, now=2.0)["qwen"].scaled is False
        assert autoscaler.step(cluster, now=31.0)["qwen"].scaled is False
        assert deployment_replicas(kube, "qwen") == 3
        decision = autoscaler.step(cluster, now=32.0)["qwen"]
        assert (decision.desired, decision.scaled) == (0, True)
        assert deployment_replicas(kube, "qwen") == 0
        assert condition(kube, "qwen", "Ready")["reason"] == "ScaledToZero"
        assert kube.read(KIND, "qwen")["status"]["desiredReplicas"] == 0
    finally:
        autoscaler.close()


def test_autoscaling_disabled_leaves_the_replicas_to_the_user(managed_models, engines, settings) -> None:
    settings.KUBEAI_AUTOSCALING_INTERVAL = settings.KUBEAI_AUTOSCALING_WINDOW = 1.0
    kube, cluster = managed_models
    kube.write(model(replicas=1, autoscalingDisabled=True, targetRequests=1))
    kube.sync()
    load = Load(engines, per_engine=2)
    wait_for(lambda: sum(e.value("vllm:num_requests_running") + e.value("vllm:num_requests_waiting")
                         for e in engines) == 4, timeout=30, message="four requests on the engines")  # fmt: skip
    autoscaler = Autoscaler()
    try:
        assert autoscaler.step(cluster, now=0.0)["qwen"].scaled is False
    finally:
        autoscaler.close()
        load.join()
    assert kube.read(KIND, "qwen")["spec"]["replicas"] == 1 and deployment_replicas(kube, "qwen") == 1


def test_growth_past_the_teams_quota_and_borrowing_is_refused_on_the_conditions(managed_models) -> None:
    """The team may hold 2 GPUs of the pool (1 guaranteed, 1 borrowed): spec.replicas 3 of one GPU
    each runs 2, and says why on ``Scaling``; at zero, admitted none, on ``Ready`` as an InferenceModel."""
    kube, cluster = managed_models
    team = Team.objects.create(name="alpha")
    NamespaceGrant.objects.create(team=team, cluster=cluster, namespace=kube.namespace)
    TeamQuota.objects.create(team=team, pool=NodePool.objects.get(cluster=cluster, name=POOL),
                             guaranteed_bytes=128 * GI, guaranteed_gpus=1, borrowing_limit_gpus=1)  # fmt: skip
    kube.write(model(resourceProfile="a100-test:1", minReplicas=0, maxReplicas=4, replicas=3))
    kube.sync()
    assert deployment_replicas(kube, "qwen") == 2
    scaling = condition(kube, "qwen", "Scaling")
    assert (scaling["status"], scaling["reason"]) == ("False", "OverQuota")
    assert scaling["message"].startswith("2 of 3 replicas admitted: ")
    assert kube.read(KIND, "qwen")["status"]["desiredReplicas"] == 2

    kube.write(model("other", resourceProfile="a100-test:1", minReplicas=0, maxReplicas=4, replicas=1))
    kube.sync()
    ready = condition(kube, "other", "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "OverQuota")
    assert deployment_replicas(kube, "other") == 0
    assert kube.read(KIND, "other")["status"]["desiredReplicas"] == 0


def test_a_request_the_gateway_holds_wakes_the_model_from_zero(managed_models, engines, running_gateway,
                                                               make_user) -> None:
    """The gateway's own wake path: it holds the request while the controller starts one replica."""
    kube, cluster = managed_models
    team = Team.objects.create(name="owners")
    NamespaceGrant.objects.create(team=team, cluster=cluster, namespace=kube.namespace)
    _, key = issue_token(make_user("owner", teams=[team]), "gateway")
    kube.write(model(minReplicas=0, maxReplicas=2))
    kube.sync()
    assert deployment_replicas(kube, "qwen") == 0

    answer = running_gateway.client(key, timeout=120).chat.completions.create(
        model=f"{kube.namespace}/qwen", messages=[{"role": "user", "content": "wake up"}], max_tokens=4)

    assert answer.choices[0].message.content
    assert kube.read(KIND, "qwen")["spec"]["replicas"] == 1
    assert ready_replicas(kube.get("apps/v1", "Deployment", "model-qwen")) == 1
    assert condition(kube, "qwen", "Ready")["reason"] == "Deployed"
