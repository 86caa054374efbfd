"""Endpoint picking (inference_gateway/picking/) through the real gateway, on the real control plane,
with simulated engines (devstack/sim_engine.py) as the replicas: real processes listed in
hand-written EndpointSlices, as tests/gateway/test_load_balancing.py publishes its backends.

KubeAI's ``PrefixHash`` keeps a prefix on one replica until that replica is over its bound, then
spills to the next on the ring; a replica whose metrics went stale counts as saturated and is
skipped; a LoRA request goes to the replica running its adapter. Each answer names the replica and
what decided (``X-Gateway-Replica``, ``X-Gateway-Picked-By``), and the model page's table shows
the gateway's view (``ReplicaSnapshot``)."""

from __future__ import annotations

import os
import signal
import threading

import pytest
import requests

from inference_gateway.models import ReplicaSnapshot
from inference_gateway.picking.picker import replica_name
from tests.clusters.conftest import sample_manifest, wait_for
from tests.gateway import test_load_balancing as balancing
from tests.gateway.conftest import metrics_text, sample_value
from tests.support.sim_engines import Engine, start_engine_fixture

mirrored = balancing.mirrored
start_engine = start_engine_fixture
SYSTEM = "You are the support assistant of tenant one. " * 20
HOLD_OPTIONS = ("--decode-ms", "100", "--num-blocks", "4000")  # a stream of 100 tokens lasts 10 s


@pytest.fixture
def picking_settings(gateway_settings):
    """Metrics read every 50 ms as in production; stale after 1 s rather than 200 ms, so a busy test
    machine's pauses do not make every replica look saturated."""
    gateway_settings.GATEWAY_ENGINE_METRICS_STALE_SECONDS = 1.0
    return gateway_settings


def engines(start_engine, names: str, *options: str) -> list[Engine]:
    host = balancing.host_address()
    return [start_engine(name, *options, host=host) for name in names]


def ask(gateway, key: str, model: str, user: str, stream: bool = False, max_tokens: int = 1,
        system: str = SYSTEM) -> requests.Response:
    answer = requests.post(f"{gateway.url}/v1/chat/completions", headers={"Authorization": f"Bearer {key}"},
                           json={"model": model, "stream": stream, "max_tokens": max_tokens,
                                 "messages": [{"role": "system", "content": system},
                                              {"role": "user", "content": user}]},
                           stream=stream, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer


def picked(answer: requests.Response) -> tuple[str, str]:
    return answer.headers["X-Gateway-Replica"], answer.headers["X-Gateway-Picked-By"]


def hold_directly(engine: Engine, model: str) -> threading.Thread:
    """A long request sent to the engine itself (not through the gateway), running there for seconds."""
    def call() -> None:
        requests.post(f"{engine.url}/v1/chat/completions", timeout=120, json={
            "model": model, "max_tokens": 100, "messages": [{"role": "user", "content": "hold the slot"}]})

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread


def snapshot_rows(name: str) -> dict[str, dict]:
    rows: dict[str, dict] = {}
    for snapshot in ReplicaSnapshot.objects.filter(name=name):
        rows.update({row["replica"]: row for row in snapshot.replicas})
    return rows


def test_prefix_hash_keeps_a_prefix_on_one_replica_until_its_bound_then_spills(
        mirrored, picking_settings, gateway, start_engine) -> None:
    kube, key = mirrored
    replicas = engines(start_engine, "abc", *HOLD_OPTIONS)
    balancing.publish_replicas(kube, "kubeai", replicas, port=80)  # KubeAI's Service, listing the engines
    manifest = sample_manifest("model-llama-3.1-8b-instruct-fp8-l4.yaml")  # PrefixHash 125 / 256 / 100
    kube.write(manifest)
    kube.sync()
    model = "llama-3.1-8b-instruct-fp8-l4"

    first = [picked(ask(gateway, key, model, "My order 1234 has not arrived")) for _ in range(4)]
    home = first[0][0]
    assert first == [(home, "prefix-hash")] * 4  # one prefix, one replica

    held = ask(gateway, key, model, "My order 1234 has not arrived", stream=True, max_tokens=100)
    assert picked(held) == (home, "prefix-hash")
    # home has 1 in flight, over 125% of the mean counting the new request ((1 + 1) / 3 * 1.25): it spills
    spilled = picked(ask(gateway, key, model, "My order 1234 has not arrived"))
    assert spilled[0] != home and spilled[1] == "prefix-hash"
    held.close()  # the client leaves: the gateway cancels the call, home's load goes back to 0

    wait_for(lambda: picked(ask(gateway, key, model, "My order 1234 has not arrived"))[0] == home, timeout=30,
             message="the prefix back on its replica once the load is gone")
    assert {engine.name for engine in replicas if engine.stats().get("/openai/v1/chat/completions")} >= {
        next(engine.name for engine in replicas if replica_name(engine.url) == home)}
    text = metrics_text(gateway)
    assert sample_value(text, "inference_portal_gateway_picks_total", model=f"{kube.namespace}/{model}",
                        replica=home, scorer="prefix-hash") >= 6


def test_a_replica_with_stale_metrics_is_skipped(mirrored, picking_settings, gateway, start_engine) -> None:
    kube, key = mirrored
    a, b = engines(start_engine, "ab", "--num-blocks", "4000")
    balancing.publish_replicas(kube, "llama", [a, b])
    balancing.serve_through_service(kube, "llama")
    wait_for(lambda: picked(ask(gateway, key, "llama-2-7b", "warm up"))[1] not in ("saturated", "only-replica"),
             timeout=30, message="both replicas' metrics read (a scorer decides)")
    os.kill(b.process.pid, signal.SIGSTOP)  # its metrics stop: stale after 1 s
    try:
        wait_for(lambda: snapshot_rows("llama-2-7b").get(replica_name(b.url), {}).get("fresh") is False,
                 timeout=30, message="the gateway seeing b's metrics go stale")
        answers = [picked(ask(gateway, key, "llama-2-7b", f"question {index}")) for index in range(5)]
        assert answers == [(replica_name(a.url), "only-replica")] * 5
    finally:
        os.kill(b.process.pid, signal.SIGCONT)


def test_a_lora_request_goes_to_the_replica_running_its_adapter(
        mirrored, picking_settings, gateway, start_engine) -> None:
    kube, key = mirrored
    replicas = engines(start_engine, "abc", "--max-loras", "1", "--lora", "sql", "--lora", "chat", *HOLD_OPTIONS)
    a, b, c = replicas
    balancing.publish_replicas(kube, "llama", replicas)
    balancing.serve_through_service(kube, "llama")
    holds = [hold_directly(b, "sql"), hold_directly(a, "chat"), hold_directly(c, "chat")]  # every slot taken
    ask(gateway, key, "llama-2-7b", "the gateway starts reading the engines")
    expected = {replica_name(a.url): ["chat"], replica_name(b.url): ["sql"], replica_name(c.url): ["chat"]}
    wait_for(lambda: {name: row.get("adapters") for name, row in snapshot_rows("llama-2-7b").items()
                      if row.get("fresh")} == expected, timeout=30, message="the gateway seeing each replica's adapter")

    answer = ask(gateway, key, "llama-2-7b_sql", "SELECT the orders of last week", max_tokens=2)

    assert picked(answer) == (replica_name(b.url), "lora-affinity")
    assert answer.json()["model"] == "sql"  # the engine ran the adapter, named as KubeAI names it
    assert b.stats()["adapter:sql"] == 2 and "adapter:sql" not in a.stats() | c.stats()
    missing = requests.post(f"{gateway.url}/v1/chat/completions", headers={"Authorization": f"Bearer {key}"},
                            json={"model": "no-such-model_sql", "messages": [{"role": "user", "content": "hi"}]},
                            timeout=30)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
    for thread in holds:
        thread.join(timeout=60)
