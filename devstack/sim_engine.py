"""A simulated inference engine that behaves like vLLM where routing can see it, run as a real process
by the gateway's routing tests, ``python -m bench routing`` and the live demo
(``python -m devstack.sim_engine --port 0 --name a``; ``manage.py sim_engine``).

It speaks the OpenAI API with the demo backend's shapes (``devstack.openai_backend``: a chat or a
completion echoes the last message, one token per word, streamed or whole, with ``usage``;
embeddings as there) and models what decides a request's time in vLLM's V1 engine:

- **Continuous batching.** One scheduler loop runs steps. Each step admits waiting requests first
  come first served while fewer than ``--max-num-seqs`` run and the KV cache has room (the first
  that does not fit stops admission, as vLLM's FCFS policy does; one waiting for a LoRA slot is
  passed over), then every running sequence gets one token. A step lasts the prefill of what it
  admitted plus one decode step: ``prefill_ms_per_token`` times the prompt tokens not already
  cached, plus ``decode_ms`` + ``decode_ms_per_seq`` times the batch.
- **KV cache with automatic prefix caching.** ``--num-blocks`` blocks of ``--block-size`` tokens.
  A full block is named by a hash chained over its tokens and its parent's hash (vLLM's
  ``hash_block_tokens``), so two prompts share blocks exactly as far as they share a prefix; a
  request's cached prefix is skipped by prefill. Blocks nobody holds stay cached and are evicted
  least recently used first, a finished request's last blocks before its first (vLLM frees them in
  reverse order), so a shared prefix outlives the turns after it. A request holds blocks for its
  prompt and its ``max_tokens`` from admission to its end (no preemption: simpler than vLLM, and
  it errs towards queueing); the full blocks of its prompt and answer stay cached after it ends,
  so the next turn of a conversation hits them.
- **LoRA.** Adapters are registered at start (``--lora NAME``) or by vLLM's runtime API
  (``POST /v1/load_lora_adapter``, ``/v1/unload_lora_adapter``; ``/v1/models`` lists them with
  their ``parent``); a request whose ``model`` names one runs with it. At most ``--max-loras``
  adapters are active in a batch; activating one that is not costs ``--lora-load-ms`` in its
  step and takes the slot of an active adapter no running request uses.
- **Time scale.** Every simulated duration is multiplied by ``--time-scale`` before the loop
  sleeps it (0.01: a 2 s prefill takes 20 ms), so tests and benchmarks run fast; the reported
  metrics are in simulated seconds, as the engine on its GPU would report them.

``GET /metrics`` serves vLLM's names (prometheus_client's exposition, labels ``model_name`` and
``engine`` as vLLM's V1 writes them): ``vllm:num_requests_waiting``, ``vllm:num_requests_running``,
``vllm:kv_cache_usage_perc`` and the older ``vllm:gpu_cache_usage_perc`` (0 to 1: blocks held by
running requests over all blocks; cached blocks nobody holds count as free, as in V1),
``vllm:prefix_cache_queries_total`` and ``vllm:prefix_cache_hits_total`` (prompt tokens looked up
and found), ``vllm:lora_requests_info`` (labels ``running_lora_adapters``,
``waiting_lora_adapters``, ``max_lora``), ``vllm:cache_config_info`` (``block_size``,
``num_gpu_blocks``, ``enable_prefix_caching``) and ``vllm:time_to_first_token_seconds``.

**Defaults: Llama 3.1 8B Instruct (BF16) on one H100 80 GB under vLLM**, as measured in "Performance
of Llama 3.1 8B AI Inference using vLLM on ND-H100-v5" (Microsoft Azure HPC blog, Aug 2025) and
the vLLM v0.6.0 release measurements (vLLM blog, "vLLM v0.6.0: 2.7x Throughput Improvement and 5x
Latency Reduction", Sept 2024, Llama 3 8B on 1xH100): prefill of about 10,000 prompt tokens a
second (``prefill_ms_per_token`` 0.1), a decode step of about 8 ms at small batches growing to about
20 ms near 128 sequences (``decode_ms`` 7 + ``decode_ms_per_seq`` 0.1), vLLM's default
``max_num_seqs`` of 128 (``SchedulerConfig.DEFAULT_MAX_NUM_SEQS``) and block size 16. The block
count follows from the model's shape: 32 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 bytes is
128 KiB a token, and 0.9 of 80 GB less 16 GB of weights leaves about 56 GB, 26,000 blocks of 16
tokens. What it leaves out: tokenization (a token is a word), chunked prefill, preemption and
swapping, speculative decoding, and the variance of real kernels.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import socket
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from devstack import openai_backend
from devstack.openai_backend import NAME, STATS, answer_words, bad_request, chunk_body, completion_body, usage

ENGINE = web.AppKey("engine", "Engine")
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0)  # vLLM's own buckets for this histogram


@dataclass(frozen=True)
class EngineConfig:
    """What the engine is: its defaults are the measurement in the module's docstring."""

    model: str = "llama-3.1-8b-instruct"
    num_blocks: int = 26_000
    block_size: int = 16
    max_num_seqs: int = 128
    prefill_ms_per_token: float = 0.1
    decode_ms: float = 7.0
    decode_ms_per_seq: float = 0.1
    max_loras: int = 1
    lora_load_ms: float = 25.0
    time_scale: float = 1.0


def prompt_tokens(body: dict[str, Any]) -> list[str]:
    """The prompt as tokens (words): every message with its role, as a chat template lays them out
    in order, so a conversation's next turn extends the previous one's prompt."""
    if "messages" in body:
        tokens: list[str] = []
        for message in body.get("messages") or []:
            if not isinstance(message, dict):
                raise ValueError("messages: every message must be an object")
            content = message.get("content", "")
            if isinstance(content, list):  # OpenAI's content parts
                content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
            tokens.append(f"<|{message.get('role', 'user')}|>")
            tokens.extend(str(content).split())
        return tokens
    prompt = body.get("prompt", "")
    return str(prompt[0] if isinstance(prompt, list) and prompt else prompt).split()


def block_hashes(tokens: list[str], block_size: int, adapter: str | None = None) -> list[int]:
    """The chained hash of every full block (vLLM's ``hash_block_tokens``: a block's hash covers its
    parent's, so equal hashes mean equal prefixes; a LoRA adapter's blocks are its own, as vLLM
    keys them by the adapter too)."""
    hashes, parent = [], hash(adapter) if adapter else 0
    for start in range(0, len(tokens) - block_size + 1, block_size):
        parent = hash((parent, tuple(tokens[start:start + block_size])))
        hashes.append(parent)
    return hashes


@dataclass
class Sequence:
    """One request in the engine."""

    tokens: list[str]
    answer: list[str]
    adapter: str | None
    arrived: float
    out: asyncio.Queue = field(default_factory=asyncio.Queue)  # a token string per step; None: done
    hashed: list[int] = field(default_factory=list)  # the cached blocks it holds (its prompt's prefix)
    anonymous: int = 0  # the blocks it holds that have no hash yet
    uncached: int = 0  # prompt tokens prefill must compute
    generated: int = 0


class KVCache:
    """``num_blocks`` blocks: held anonymously by running requests, or named by a hash (held or not);
    the named blocks nobody holds are the LRU that allocation evicts from."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks, self.block_size = num_blocks, block_size
        self.references: dict[int, int] = {}  # hash -> holders
        self.evictable: OrderedDict[int, None] = OrderedDict()  # unheld hashes, least recently used first
        self.anonymous = 0

    @property
    def free(self) -> int:
        """Blocks allocation may take: never used, or cached and held by nobody."""
        return self.num_blocks - self.anonymous - len(self.references) + len(self.evictable)

    @property
    def usage(self) -> float:
        """vLLM's ``kv_cache_usage_perc`` (0-1): the blocks running requests hold."""
        return (self.anonymous + len(self.references) - len(self.evictable)) / self.num_blocks

    def cached_prefix(self, hashes: list[int]) -> int:
        """How many leading blocks of ``hashes`` are cached."""
        count = 0
        for block in hashes:
            if block not in self.references:
                break
            count += 1
        return count

    def _take(self, count: int) -> None:
        unused = self.num_blocks - self.anonymous - len(self.references)
        for _ in range(max(0, count - unused)):
            victim, _ = self.evictable.popitem(last=False)
            del self.references[victim]
        self.anonymous += count

    def admit(self, sequence: Sequence, blocks_needed: int) -> bool:
        """Hold the sequence's cached prefix and allocate the rest; False (nothing held) when it does not fit."""
        hashes = block_hashes(sequence.tokens, self.block_size, sequence.adapter)
        hit = self.cached_prefix(hashes)
        new = blocks_needed - hit
        if new > self.free - sum(1 for block in hashes[:hit] if block in self.evictable):
            return False
        for block in hashes[:hit]:
            self.references[block] += 1
            self.evictable.pop(block, None)
        self._take(new)
        # The prompt's own full blocks are named now: a later request with the same prefix shares them.
        for block in hashes[hit:]:
            if block in self.references:  # named meanwhile by another request: this one's copy stays anonymous
                continue
            self.references[block] = 1
            self.anonymous -= 1
            sequence.hashed.append(block)
        sequence.hashed[:0] = hashes[:hit]
        sequence.anonymous = new - (len(sequence.hashed) - hit)
        sequence.uncached = len(sequence.tokens) - hit * self.block_size
        return True

    def release(self, sequence: Sequence) -> None:
        """The sequence ends: its prompt's and answer's full blocks stay cached (unheld), the rest is
        freed. They join the LRU tail first, as vLLM's ``KVCacheManager.free`` frees a request's blocks
        in reverse order: eviction takes a sequence's last blocks before its first, so a shared prefix
        (a system prompt) outlives the turns after it. (In order, the first block went first, and with
        it every hit on the chain behind it.)"""
        unheld = []
        for block in sequence.hashed:
            self.references[block] -= 1
            if self.references[block] == 0:
                unheld.append(block)
        full = block_hashes(sequence.tokens + sequence.answer[:sequence.generated], self.block_size, sequence.adapter)
        for block in full[len(sequence.hashed):]:
            if sequence.anonymous == 0:
                break
            if block in self.references:
                continue
            sequence.anonymous -= 1
            self.anonymous -= 1
            self.references[block] = 0
            unheld.append(block)
        for block in reversed(unheld):
            self.evictable[block] = None
            self.evictable.move_to_end(block)
        self.anonymous -= sequence.anonymous
        sequence.anonymous = 0
        sequence.hashed = []


class EngineMetrics:
    """vLLM's metric names (see the module's docstring), in a registry of the engine's own."""

    def __init__(self, config: EngineConfig) -> None:
        self.registry = registry = CollectorRegistry()
        labels = {"model_name": config.model, "engine": "0"}
        names = list(labels)
        self.waiting = Gauge("vllm:num_requests_waiting", "Requests waiting to be processed.", names,
                             registry=registry).labels(**labels)
        self.running = Gauge("vllm:num_requests_running", "Requests in the model execution batch.", names,
                             registry=registry).labels(**labels)
        self.kv_usage = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", names,
                              registry=registry).labels(**labels)
        self.gpu_usage = Gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage (deprecated name of "
                               "vllm:kv_cache_usage_perc).", names, registry=registry).labels(**labels)
        self.queries = Counter("vllm:prefix_cache_queries", "Prefix cache queries, in queried tokens.", names,
                               registry=registry).labels(**labels)
        self.hits = Counter("vllm:prefix_cache_hits", "Prefix cache hits, in cached tokens.", names,
                            registry=registry).labels(**labels)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                              names, buckets=TTFT_BUCKETS, registry=registry).labels(**labels)
        self.lora = Gauge("vllm:lora_requests_info", "Running stats on lora requests.",
                          ["running_lora_adapters", "max_lora", "waiting_lora_adapters"], registry=registry)
        self.max_lora = str(config.max_loras)
        self.lora_labels: tuple[str, str] | None = None
        cache = Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                      ["block_size", "num_gpu_blocks", "enable_prefix_caching", "cache_dtype"], registry=registry)
        cache.labels(str(config.block_size), str(config.num_blocks), "True", "auto").set(1)

    def lora_state(self, running: str, waiting: str) -> None:
        """One series with the current adapters, as vLLM's gauge (its value: when it was written)."""
        if self.lora_labels != (running, waiting):
            if self.lora_labels is not None:
                self.lora.remove(self.lora_labels[0], self.max_lora, self.lora_labels[1])
            self.lora_labels = (running, waiting)
        self.lora.labels(running, self.max_lora, waiting).set(time.time())


class Engine:
    """The scheduler loop and its state (see the module's docstring)."""

    def __init__(self, config: EngineConfig, adapters: list[str] | None = None) -> None:
        self.config = config
        self.cache = KVCache(config.num_blocks, config.block_size)
        self.metrics = EngineMetrics(config)
        self.adapters: dict[str, str] = {name: f"/adapters/{name}" for name in adapters or []}  # name -> path
        self.active: OrderedDict[str, None] = OrderedDict()  # adapters in LoRA slots, least recently used first
        self.waiting: list[Sequence] = []
        self.running: list[Sequence] = []
        self.wakeup = asyncio.Event()
        self.loop_task: asyncio.Task | None = None
        self.publish()

    def blocks_needed(self, sequence: Sequence) -> int:
        return math.ceil((len(sequence.tokens) + len(sequence.answer)) / self.config.block_size)

    def submit(self, sequence: Sequence) -> None:
        self.waiting.append(sequence)
        self.wakeup.set()
        self.publish()

    def cancel(self, sequence: Sequence) -> None:
        """A client that left: its request leaves the queue or the batch and gives its blocks back."""
        if sequence in self.waiting:
            self.waiting.remove(sequence)
        elif sequence in self.running:
            self.running.remove(sequence)
            self.cache.release(sequence)
        self.publish()

    def _lora_slot(self, adapter: str | None, loads: list[str]) -> bool:
        """Whether ``adapter`` can run in this step, activating it if a slot is free (``loads``)."""
        if adapter is None or adapter in self.active:
            if adapter is not None:
                self.active.move_to_end(adapter)
            return True
        if len(self.active) >= self.config.max_loras:
            in_use = {sequence.adapter for sequence in self.running}
            idle = next((name for name in self.active if name not in in_use), None)
            if idle is None:
                return False
            del self.active[idle]
        self.active[adapter] = None
        loads.append(adapter)
        return True

    def _admit(self) -> tuple[int, int]:
        """Admit waiting requests for this step: (prompt tokens to prefill, adapters loaded)."""
        prefill, loads, passed = 0, [], []
        while self.waiting and len(self.running) < self.config.max_num_seqs:
            sequence = self.waiting[0]
            if not self._lora_slot(sequence.adapter, loads):
                passed.append(self.waiting.pop(0))  # waits for a slot; the others may still run
                continue
            if not self.cache.admit(sequence, self.blocks_needed(sequence)):
                break  # first come first served: nothing behind it jumps the KV cache's queue
            self.waiting.pop(0)
            queried = len(sequence.tokens)
            self.metrics.queries.inc(queried)
            self.metrics.hits.inc(queried - sequence.uncached)
            prefill += sequence.uncached
            self.running.append(sequence)
        self.waiting[:0] = passed
        return prefill, len(loads)

    async def run(self) -> None:
        config = self.config
        while True:
            if not self.waiting and not self.running:
                self.wakeup.clear()
                await self.wakeup.wait()
            prefill, loads = self._admit()
            self.publish()
            if not self.running:  # waiting for what no step can free (a LoRA slot held by nobody running)
                self.wakeup.clear()
                await self.wakeup.wait()
                continue
            step_ms = (prefill * config.prefill_ms_per_token + loads * config.lora_load_ms
                       + config.decode_ms + config.decode_ms_per_seq * len(self.running))
            await asyncio.sleep(step_ms / 1000 * config.time_scale)
            now = time.monotonic()
            for sequence in list(self.running):
                if sequence.generated == 0:
                    self.metrics.ttft.observe((now - sequence.arrived) / config.time_scale)
                sequence.out.put_nowait(sequence.answer[sequence.generated])
                sequence.generated += 1
                if sequence.generated >= len(sequence.answer):
                    sequence.out.put_nowait(None)
                    self.running.remove(sequence)
                    self.cache.release(sequence)
            self.publish()

    def publish(self) -> None:
        metrics, cache = self.metrics, self.cache
        metrics.waiting.set(len(self.waiting))
        metrics.running.set(len(self.running))
        metrics.kv_usage.set(cache.usage)
        metrics.gpu_usage.set(cache.usage)
        running = {sequence.adapter for sequence in self.running if sequence.adapter}
        waiting = {sequence.adapter for sequence in self.waiting if sequence.adapter}
        metrics.lora_state(",".join(sorted(running)), ",".join(sorted(waiting)))


def _error(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "code": status, "param": None}},
                             status=status)


async def generate(request: web.Request) -> web.StreamResponse:
    engine: Engine = request.app[ENGINE]
    try:
        body = await request.json()
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
        answer = answer_words(body)
        tokens = prompt_tokens(body)
    except Exception as error:  # any body it cannot read is the client's error, as vLLM answers
        return bad_request(error)
    model = str(body.get("model") or "")
    adapter = model if model in engine.adapters else None
    chat = request.path.endswith("/chat/completions")
    stats, name = request.app[STATS], request.app[NAME]
    stats[request.path] = stats.get(request.path, 0) + 1
    if adapter:
        stats[f"adapter:{adapter}"] = stats.get(f"adapter:{adapter}", 0) + 1
    sequence = Sequence(tokens, answer, adapter, time.monotonic())
    engine.submit(sequence)
    created, ident = int(time.time()), f"cmpl-{name}-{stats[request.path]}"
    headers = {"X-Backend": name}
    try:
        if not body.get("stream"):
            while await sequence.out.get() is not None:
                pass
            return web.json_response(completion_body(ident, chat, created, body.get("model"), name, answer,
                                                     usage(len(tokens), len(answer))), headers=headers)
        response = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream"})
        await response.prepare(request)
        while (token := await sequence.out.get()) is not None:
            chunk = chunk_body(ident, chat, created, body.get("model"), name, token)
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        if (body.get("stream_options") or {}).get("include_usage"):
            last = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": body.get("model"),
                    "choices": [], "usage": usage(len(tokens), len(answer))}
            await response.write(b"data: " + json.dumps(last).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        return response
    except (asyncio.CancelledError, ConnectionResetError):
        engine.cancel(sequence)
        stats["cancelled"] = stats.get("cancelled", 0) + 1
        raise


async def models(request: web.Request) -> web.Response:
    """The base model and every registered adapter (``parent``: the base), as vLLM lists them."""
    engine: Engine = request.app[ENGINE]
    created = int(time.time())
    data = [{"id": engine.config.model, "object": "model", "created": created, "owned_by": "vllm",
             "root": engine.config.model, "parent": None}]
    data += [{"id": name, "object": "model", "created": created, "owned_by": "vllm", "root": path,
              "parent": engine.config.model} for name, path in engine.adapters.items()]
    return web.json_response({"object": "list", "data": data})


async def _lora_body(request: web.Request) -> dict[str, Any] | web.Response:
    try:
        body = await request.json()
    except ValueError as error:
        return _error(400, f"bad request: {error}")
    if not isinstance(body, dict) or not isinstance(body.get("lora_name"), str) or not body["lora_name"]:
        return _error(400, "lora_name: the adapter's name (a string) is required")
    return body


async def load_lora_adapter(request: web.Request) -> web.Response:
    """vLLM's ``POST /v1/load_lora_adapter`` (``{"lora_name", "lora_path"}``): registered, active on first use."""
    engine: Engine = request.app[ENGINE]
    body = await _lora_body(request)
    if isinstance(body, web.Response):
        return body
    name = body["lora_name"]
    if not isinstance(body.get("lora_path"), str) or not body["lora_path"]:
        return _error(400, "lora_path: the adapter's path (a string) is required")
    if name in engine.adapters:
        return _error(400, f"The lora adapter '{name}' has already been loaded.")
    engine.adapters[name] = body["lora_path"]
    return web.Response(text=f"Success: LoRA adapter '{name}' added successfully.")


async def unload_lora_adapter(request: web.Request) -> web.Response:
    """vLLM's ``POST /v1/unload_lora_adapter`` (``{"lora_name"}``)."""
    engine: Engine = request.app[ENGINE]
    body = await _lora_body(request)
    if isinstance(body, web.Response):
        return body
    name = body["lora_name"]
    if name not in engine.adapters:
        return _error(404, f"The lora adapter '{name}' cannot be found.", "not_found_error")
    del engine.adapters[name]
    engine.active.pop(name, None)
    return web.Response(text=f"Success: LoRA adapter '{name}' removed successfully.")


async def metrics_view(request: web.Request) -> web.Response:
    engine: Engine = request.app[ENGINE]
    engine.publish()
    return web.Response(body=generate_latest(engine.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})


async def healthz(_request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


def make_app(name: str, config: EngineConfig, adapters: list[str] | None = None) -> web.Application:
    app = web.Application()
    app[STATS], app[NAME] = {}, name
    app[ENGINE] = engine = Engine(config, adapters)

    async def start(_app: web.Application) -> None:
        engine.loop_task = asyncio.ensure_future(engine.run())

    async def stop(_app: web.Application) -> None:
        if engine.loop_task is not None:
            engine.loop_task.cancel()
            await asyncio.gather(engine.loop_task, return_exceptions=True)

    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    # KubeAI's proxy serves under /openai (inference_gateway.routes): the same API answers there.
    for prefix in ("", "/openai"):
        app.router.add_get(f"{prefix}/v1/models", models)
        app.router.add_post(f"{prefix}/v1/chat/completions", generate)
        app.router.add_post(f"{prefix}/v1/completions", generate)
        app.router.add_post(f"{prefix}/v1/embeddings", openai_backend.embeddings)
    app.router.add_post("/v1/load_lora_adapter", load_lora_adapter)
    app.router.add_post("/v1/unload_lora_adapter", unload_lora_adapter)
    app.router.add_get("/metrics", metrics_view)
    app.router.add_get("/health", healthz)
    app.router.add_get("/stats", openai_backend.stats_view)
    return app


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The engine's options, for ``python -m devstack.sim_engine`` and ``manage.py sim_engine``."""
    defaults = EngineConfig()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True, help="0: any free port, announced on stdout")
    parser.add_argument("--name", default="engine")
    parser.add_argument("--model", default=defaults.model, help="the base model's name")
    parser.add_argument("--num-blocks", type=int, default=defaults.num_blocks)
    parser.add_argument("--block-size", type=int, default=defaults.block_size)
    parser.add_argument("--max-num-seqs", type=int, default=defaults.max_num_seqs)
    parser.add_argument("--prefill-ms-per-token", type=float, default=defaults.prefill_ms_per_token)
    parser.add_argument("--decode-ms", type=float, default=defaults.decode_ms)
    parser.add_argument("--decode-ms-per-seq", type=float, default=defaults.decode_ms_per_seq)
    parser.add_argument("--max-loras", type=int, default=defaults.max_loras)
    parser.add_argument("--lora-load-ms", type=float, default=defaults.lora_load_ms)
    parser.add_argument("--lora", action="append", default=[], help="an adapter registered at start (repeatable)")
    parser.add_argument("--time-scale", type=float, default=defaults.time_scale,
                        help="real seconds per simulated second (0.01: a hundred times faster)")


def config_from(options: dict[str, Any]) -> EngineConfig:
    return EngineConfig(**{key: options[key] for key in EngineConfig.__dataclass_fields__})


def serve(host: str, port: int, name: str, config: EngineConfig, adapters: list[str]) -> None:
    """Serve until interrupted; once listening, print ``listening on http://HOST:PORT``."""
    for value, what in ((config.num_blocks, "--num-blocks"), (config.block_size, "--block-size"),
                        (config.max_num_seqs, "--max-num-seqs"), (config.max_loras, "--max-loras")):
        if value < 1:
            raise SystemExit(f"{what} must be at least 1, not {value}")
    if config.time_scale <= 0:
        raise SystemExit(f"--time-scale must be above 0, not {config.time_scale}")
    listener = socket.create_server((host, port))
    print(f"listening on http://{host}:{listener.getsockname()[1]}", flush=True)
    web.run_app(make_app(name, config, adapters), sock=listener, print=None, access_log=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    options = vars(parser.parse_args())
    serve(options["host"], options["port"], options["name"], config_from(options), options["lora"])


if __name__ == "__main__":
    main()
