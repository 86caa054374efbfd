"""Routing on simulated engines: random, least load, KubeAI's PrefixHash and the scorers, side by side.

Processes, for each arm in turn: four simulated engines (devstack/sim_engine.py, fresh, so every
arm starts with cold caches), the gateway (bench/routing_gateway.py: the gateway's own code with
the four engines as every model's replicas; one worker) and this process as the clients. Each arm
is one model: InferenceModels whose ``inference-portal.io/endpoint-picker`` annotation says
``random``, ``least-load`` or ``scorer``, and a KubeAI Model with ``loadBalancing.strategy:
PrefixHash`` (KubeAI's defaults: 125, 256, 100).

**Workload**, llm-d's shared-prefix benchmark as issue 42 describes it (p90 TTFT 0.54 s precise
prefix-aware against 92.6 s random: 150 tenants sharing 6k-token prefixes), on four replicas:
``TENANTS`` (150) tenants, each with its own system prompt of ``SYSTEM_TOKENS`` (6,000) tokens;
conversations of ``TURNS`` turns, each turn a new question of ``QUESTION_WORDS`` tokens after the
whole conversation so far (so a turn's prompt extends the previous one's); answers of
``MAX_TOKENS`` tokens, streamed. A token is a word of three letters (about four characters a
token with its space, as English text under Llama 3's tokenizer), so the gateway's character-based
prefix blocks see the text a real prompt of that many tokens would have. The warm-up sends every
tenant's first turn once, in a random order, at the measured rate (a service that has served its
tenants: without it, with 150 tenants nearly every conversation of a short run is its tenant's
first, a cold miss for every arm alike); then requests arrive open loop (Poisson) at ``RATE`` a
simulated second, each the next turn of a conversation not in flight (a new one of a random
tenant when none is ready).

**Load: near the replicas' capacity.** ``RATE`` is ``LOAD`` (0.9) times what the four engines'
prefill can compute when no prompt is cached (prefill rate over the mean prompt of a
conversation's turns), so an arm that keeps the prefix caches warm serves it with room and one
that does not queues. The engines are the simulated engine's defaults (devstack/sim_engine.py:
Llama 3.1 8B on one H100, its 26,000 KV blocks of 16 tokens; only ``TIME_SCALE`` set): 150
system prompts are 900,000 tokens, more than twice one engine's 416,000, while a quarter of them
fit one engine beside the running requests, as in llm-d's setting (150 prefixes over 16 H100s).
Until issue 42's item 5 was checked the benchmark ran 12 tenants of 1,500 tokens on engines cut to
600 blocks and 64 sequences at 64% of the uncached capacity: neither the issue's workload nor the
published engine.

**Figures** (simulated seconds and tokens, as the engines' GPUs would see them; measured by the
client over ``MEASURED_SECONDS`` of real time after the warm-up):

- ``routing.ttft_p50_s_<arm>``, ``routing.ttft_p90_s_<arm>``: time to first token, from sending the
  request to the first streamed chunk, at the client (the gateway, the machine's scheduling and the
  engine's queue and prefill included), divided by ``TIME_SCALE``.
- ``routing.output_tokens_per_s_<arm>``: tokens answered per simulated second over the arm.
- ``routing.ttft_p90_ratio_scorer_vs_least_load`` (target at most 0.33) and
  ``routing.ttft_p90_ratio_scorer_vs_prefix_hash`` (target at most 1.0).
- ``routing.scorer_cpu_us_per_request`` (target under 50): the CPU of the scorer's decision alone
  (``Picker.score``: the prompt's fingerprint, the saturation filter, four scorers over four
  replicas, the prefix index's update), in this process, over the arm's request bodies, with
  fresh engine states; it leaves out the gateway's request handling (bench/bench_gateway.py
  measures that: ``gateway.cpu_us_per_request_fast_backend``).
- ``routing.scorer_saturated_share``, ``routing.scorer_prefix_decided_share``: of the scorer arm's
  picks (the gateway's ``inference_portal_gateway_picks_total``), the share made with every replica
  saturated (least load) and the share the prefix-cache scorer decided.
- ``routing.machine_load_1m``: the host's 1-minute load average at the end: the figures move with it.

Leaves out: real tokenization, chunked prefill and preemption (devstack/sim_engine.py), several
gateway workers (each would keep its own prefix index), and network latency.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field

import aiohttp
import requests
from django.contrib.auth.models import User
from prometheus_client.parser import text_string_to_metric_families

from accounts.tokens import issue_token
from bench.bench_gateway import _database_url, _percentile, _start
from clusters.models import Cluster, SyncState
from devstack.openai_backend import answer_words
from devstack.ports import free_port
from devstack.sim_engine import EngineConfig
from inference_gateway.balancer import Balancer, Replica
from inference_gateway.picking.config import DEFAULT
from inference_gateway.picking.engine_state import EngineState
from inference_gateway.picking.picker import Picker
from inference_gateway.picking.scraper import Scraper
from inference_gateway.routes import Route
from models_app.models import InferenceModel, KubeAIModel

REPLICAS = 4
TENANTS = 150  # llm-d's
TURNS = 3
SYSTEM_TOKENS = 6000  # llm-d's 6k-token prefixes
QUESTION_WORDS = 40
MAX_TOKENS = 8
TIME_SCALE = 1.0
LOAD = 0.9  # of the replicas' uncached prefill capacity (the module's docstring)
# The mean prompt over a conversation's turns: the system prompt, then each turn's question and the
# answers before it, with a role token per message (devstack.sim_engine.prompt_tokens).
MEAN_PROMPT_TOKENS = 1 + SYSTEM_TOKENS + sum(
    turn * (1 + QUESTION_WORDS) + (turn - 1) * (1 + MAX_TOKENS) for turn in range(1, TURNS + 1)) / TURNS
RATE = LOAD * REPLICAS * 1000 / (EngineConfig.prefill_ms_per_token * MEAN_PROMPT_TOKENS)  # a simulated second
MEASURED_SECONDS = 45.0
ENGINE = ("--time-scale", str(TIME_SCALE))
ARMS = ("random", "least-load", "prefix-hash", "scorer")
SEED = 42
LETTERS = "abcdefghijklmnopqrstuvwxyz"
METRICS_TOKEN = "bench-routing"


@dataclass
class Conversation:
    tenant: int
    messages: list[dict[str, str]]
    turns: int = 0
    busy: bool = False


@dataclass
class Workload:
    """The tenants' system prompts and the conversations in progress (see the module's docstring)."""

    rng: random.Random = field(default_factory=lambda: random.Random(SEED))
    conversations: list[Conversation] = field(default_factory=list)
    unseen: list[int] = field(default_factory=list)  # tenants the warm-up has still to start

    def __post_init__(self) -> None:
        self.unseen = self.rng.sample(range(TENANTS), TENANTS)

    @staticmethod
    @functools.cache
    def system(tenant: int) -> str:
        """The tenant's system prompt: its name, then three-letter words from its own generator (made
        once: the client's CPU is the machine's, which the engines' timings share)."""
        words = random.Random(f"tenant-{tenant}")
        return " ".join([f"tenant{tenant}", *("".join(words.choices(LETTERS, k=3))
                                             for _ in range(SYSTEM_TOKENS - 1))])

    def question(self) -> str:
        return " ".join("".join(self.rng.choices(LETTERS, k=3)) for _ in range(QUESTION_WORDS))

    @property
    def warming(self) -> bool:
        return bool(self.unseen)

    def next_turn(self) -> Conversation:
        ready = [conversation for conversation in self.conversations if not conversation.busy]
        if self.unseen:  # the warm-up: each tenant's first turn once
            tenant = self.unseen.pop()
            conversation = Conversation(tenant, [{"role": "system", "content": self.system(tenant)}])
            self.conversations.append(conversation)
        elif ready:
            conversation = self.rng.choice(ready)
        else:
            tenant = self.rng.randrange(TENANTS)
            conversation = Conversation(tenant, [{"role": "system", "content": self.system(tenant)}])
            self.conversations.append(conversation)
        conversation.busy = True
        conversation.messages.append({"role": "user", "content": self.question()})
        return conversation

    def answered(self, conversation: Conversation) -> None:
        body = {"messages": conversation.messages, "max_tokens": MAX_TOKENS}
        conversation.messages.append({"role": "assistant", "content": " ".join(answer_words(body))})
        conversation.turns += 1
        conversation.busy = False
        if conversation.turns >= TURNS:
            self.conversations.remove(conversation)


@dataclass
class Arm:
    ttft: list[float] = field(default_factory=list)  # real seconds, requests started after the warm-up
    tokens: int = 0
    bodies: list[dict] = field(default_factory=list)
    errors: int = 0
    decided: dict[str, float] = field(default_factory=dict)  # the gateway's picks by what decided them


def _decisions(gateway_url: str) -> dict[str, float]:
    """The gateway's ``inference_portal_gateway_picks_total``, summed by what decided."""
    text = requests.get(f"{gateway_url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"},
                        timeout=10).text
    decided: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "inference_portal_gateway_picks_total":
                decided[sample.labels["scorer"]] = decided.get(sample.labels["scorer"], 0) + sample.value
    return decided


async def _one(session: aiohttp.ClientSession, url: str, headers: dict[str, str], model: str,
               workload: Workload, arm: Arm, counted: bool) -> None:
    conversation = workload.next_turn()
    body = {"model": model, "messages": list(conversation.messages), "max_tokens": MAX_TOKENS, "stream": True,
            "stream_options": {"include_usage": True}}
    arm.bodies.append(body)
    started, first = time.perf_counter(), None
    try:
        async with session.post(url, json=body, headers=headers) as answer:
            if answer.status != 200:
                arm.errors += 1
                return
            async for line in answer.content:
                if first is None and line.startswith(b"data: {"):
                    first = time.perf_counter() - started
    except aiohttp.ClientError:
        arm.errors += 1
        return
    finally:
        workload.answered(conversation)
    if counted and first is not None:
        arm.ttft.append(first)
        arm.tokens += MAX_TOKENS


async def _load(gateway_url: str, headers: dict[str, str], model: str) -> tuple[Arm, float]:
    """Open-loop arrivals for the warm-up (every tenant's first turn) and the measured window; the arm
    and its measured wall time."""
    workload, arm = Workload(), Arm()
    rng = random.Random(SEED + 1)
    url = f"{gateway_url}/v1/chat/completions"
    rate = RATE / TIME_SCALE  # real requests a second
    tasks: set[asyncio.Task] = set()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=300)) as session:
        measuring_from = end = None
        now = time.perf_counter()
        while end is None or now < end:
            if end is None and not workload.warming:
                measuring_from, end = now, now + MEASURED_SECONDS
            counted = measuring_from is not None
            task = asyncio.ensure_future(_one(session, url, headers, model, workload, arm, counted))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            await asyncio.sleep(rng.expovariate(rate))
            now = time.perf_counter()
        last = time.perf_counter()
        await asyncio.gather(*tasks)
    return arm, last - measuring_from


def _rows(cluster: Cluster) -> dict[str, str]:
    """One model per arm; the model name each is called by."""
    names = {}
    for arm in ("random", "least-load", "scorer"):
        InferenceModel.objects.create(
            cluster=cluster, namespace="bench", name=f"routing-{arm}", sync_state=SyncState.SYNCED,
            annotations={"inference-portal.io/endpoint-picker": arm},
            spec={"modelName": f"routing-{arm}", "memory": "1Gi", "backendUrl": "http://127.0.0.1:9"},
            status={"ready": True})
        names[arm] = f"bench/routing-{arm}"
    KubeAIModel.objects.create(
        cluster=cluster, namespace="bench", name="routing-prefix-hash", sync_state=SyncState.SYNCED,
        spec={"features": ["TextGeneration"], "url": "hf://bench/model", "engine": "VLLM",
              "resourceProfile": "nvidia-gpu-l4:1", "minReplicas": 4, "maxReplicas": 4,
              "loadBalancing": {"strategy": "PrefixHash",
                                "prefixHash": {"meanLoadFactor": 125, "replication": 256, "prefixCharLength": 100}}},
        status={"replicas": {"all": 4, "ready": 4}})
    names["prefix-hash"] = "bench/routing-prefix-hash"
    return names


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def _run_arm(model: str, headers: dict[str, str], env: dict[str, str]) -> tuple[Arm, float]:
    ports = [free_port() for _ in range(REPLICAS)]
    processes = [_start([sys.executable, "-m", "devstack.sim_engine", "--port", str(port), "--name", f"r{index}",
                         *ENGINE], f"http://127.0.0.1:{port}/health") for index, port in enumerate(ports)]
    try:
        gateway_port = free_port()
        replicas = ",".join(f"http://127.0.0.1:{port}" for port in ports)
        processes.append(_start([sys.executable, "-m", "bench.routing_gateway", str(gateway_port)],
                                f"http://127.0.0.1:{gateway_port}/healthz",
                                {**env, "BENCH_ROUTING_REPLICAS": replicas}))
        arm, seconds = asyncio.run(_load(f"http://127.0.0.1:{gateway_port}", headers, model))
        arm.decided = _decisions(f"http://127.0.0.1:{gateway_port}")
        return arm, seconds
    finally:
        _stop(processes)


def _scorer_cpu_us(bodies: list[dict]) -> float:
    """CPU of ``Picker.score`` per request over the arm's bodies (see the module's docstring)."""
    now = time.monotonic()
    scraper = Scraper(0.05)
    replicas = [Replica(f"http://10.0.0.{index}:8000") for index in range(4)]
    for index, replica in enumerate(replicas):
        scraper.states[replica.url] = EngineState(waiting=index % 2, running=8 + index, kv_usage=0.3 + index / 20,
                                                  adapters=frozenset(), max_lora=1, prefix_queries=0, prefix_hits=0,
                                                  read_at=now + 3600)
    picker = Picker(Balancer(5, 10), scraper, stale=1.0)
    route = Route(model="bench", kind="InferenceModel", pk=1, cluster_id=1, namespace="bench", name="bench",
                  scheme="http", host="bench", port=80, prefix="", service="bench", service_namespace="bench",
                  wakeable=False, ready=True, created=0)
    for body in bodies[:50]:  # warm: the indexes hold what earlier requests sent
        picker.score(route, DEFAULT, replicas, body, None, now)
    started = time.process_time_ns()
    for body in bodies:
        picker.score(route, DEFAULT, replicas, body, None, now)
    return (time.process_time_ns() - started) / 1000 / len(bodies)


def run() -> dict[str, float]:
    cluster = Cluster.objects.create(name="bench-routing", auth_method=Cluster.AuthMethod.SNAPSHOT)
    names = _rows(cluster)
    _, key = issue_token(User.objects.create_user("bench-routing", is_staff=True), "bench")
    headers = {"Authorization": f"Bearer {key}"}
    env = {**os.environ, "DATABASE_URL": _database_url(), "DEBUG": "false", "METRICS_TOKEN": METRICS_TOKEN}
    figures: dict[str, float] = {}
    bodies: list[dict] = []
    for arm in ARMS:
        result, seconds = _run_arm(names[arm], headers, env)
        if not result.ttft or result.errors:
            raise RuntimeError(f"arm {arm}: {len(result.ttft)} requests measured, {result.errors} failed")
        figures[f"routing.ttft_p50_s_{arm}"] = _percentile(result.ttft, 0.5) / TIME_SCALE
        figures[f"routing.ttft_p90_s_{arm}"] = _percentile(result.ttft, 0.9) / TIME_SCALE
        figures[f"routing.output_tokens_per_s_{arm}"] = result.tokens / seconds * TIME_SCALE
        if arm == "scorer":
            bodies = result.bodies
            total = sum(result.decided.values()) or 1
            figures["routing.scorer_saturated_share"] = result.decided.get("saturated", 0) / total
            figures["routing.scorer_prefix_decided_share"] = result.decided.get("prefix-cache", 0) / total
    figures["routing.ttft_p90_ratio_scorer_vs_least_load"] = (figures["routing.ttft_p90_s_scorer"]
                                                             / figures["routing.ttft_p90_s_least-load"])
    figures["routing.ttft_p90_ratio_scorer_vs_prefix_hash"] = (figures["routing.ttft_p90_s_scorer"]
                                                              / figures["routing.ttft_p90_s_prefix-hash"])
    figures["routing.scorer_cpu_us_per_request"] = _scorer_cpu_us(bodies)
    figures["routing.machine_load_1m"] = os.getloadavg()[0]
    return figures
