"""The simulated engine (devstack/sim_engine.py) as a real process: what routing relies on it to
show through vLLM's metric names. Prefix hits are counted in tokens of whole cached blocks, a
request beyond ``--max-num-seqs`` waits in the queue, LoRA adapters take the ``--max-loras`` slots
and one that finds no slot waits; vLLM's LoRA API registers and removes adapters."""

from __future__ import annotations

import threading

import requests

from tests.clusters.conftest import wait_for
from tests.support.sim_engines import Engine, start_engine_fixture

start_engine = start_engine_fixture
SYSTEM = " ".join(f"rule{index}" for index in range(63))  # with the role token: 64 tokens, 4 blocks of 16


def chat(engine: Engine, user: str, model: str = "base", max_tokens: int | None = None, system: str = SYSTEM) -> dict:
    body = {"model": model, "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
    if max_tokens:
        body["max_tokens"] = max_tokens
    answer = requests.post(f"{engine.url}/v1/chat/completions", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def in_background(call, *args, **kwargs) -> threading.Thread:
    thread = threading.Thread(target=call, args=args, kwargs=kwargs, daemon=True)
    thread.start()
    return thread


def test_a_shared_prefix_is_a_prefix_cache_hit_counted_in_tokens(start_engine) -> None:
    engine = start_engine("a", "--time-scale", "0.01", "--num-blocks", "64")

    first = chat(engine, "what is the first question")
    assert first["choices"][0]["message"]["content"] == "what is the first question"  # the demo's echo
    assert first["usage"]["prompt_tokens"] == 64 + 6
    assert (engine.value("vllm:prefix_cache_queries_total"), engine.value("vllm:prefix_cache_hits_total")) == (70, 0)

    chat(engine, "a different question for you")  # the system prompt's 4 blocks are cached; the rest is not
    assert (engine.value("vllm:prefix_cache_queries_total"), engine.value("vllm:prefix_cache_hits_total")) == (
        140, 64)
    chat(engine, "no shared prefix", system="something else entirely")
    assert engine.value("vllm:prefix_cache_hits_total") == 64
    assert engine.value("vllm:time_to_first_token_seconds_count") == 3
    config = engine.metrics()["vllm:cache_config_info"][0][0]
    assert (config["block_size"], config["num_gpu_blocks"], config["enable_prefix_caching"]) == ("16", "64", "True")


def test_eviction_takes_a_finished_requests_last_blocks_first_so_its_prefix_keeps_hitting(start_engine) -> None:
    """vLLM frees a request's blocks in reverse order (``KVCacheManager.free``): under pressure the
    LRU loses a conversation's tail before the system prompt other requests share."""
    engine = start_engine("a", "--time-scale", "0.01", "--num-blocks", "10")
    chat(engine, " ".join(f"first{index}" for index in range(31)), max_tokens=1)  # 96 tokens: 6 blocks stay cached
    # 64 tokens of another prompt and its answer: 5 blocks, of the 4 never used and 1 evicted
    chat(engine, " ".join(f"other{index}" for index in range(15)), max_tokens=1,
         system=" ".join(f"another{index}" for index in range(47)))
    assert engine.value("vllm:prefix_cache_hits_total") == 0

    chat(engine, " ".join(f"second{index}" for index in range(15)), max_tokens=1)
    assert engine.value("vllm:prefix_cache_hits_total") == 64  # the system prompt's 4 blocks survived


def test_requests_beyond_the_running_cap_wait_in_the_queue(start_engine) -> None:
    engine = start_engine("a", "--max-num-seqs", "2", "--decode-ms", "200", "--num-blocks", "1000")
    threads = [in_background(chat, engine, f"question {index}", max_tokens=30) for index in range(4)]

    wait_for(lambda: (engine.value("vllm:num_requests_running"), engine.value("vllm:num_requests_waiting")) == (2, 2),
             timeout=30, message="two running and two waiting")
    assert 0 < engine.value("vllm:kv_cache_usage_perc") == engine.value("vllm:gpu_cache_usage_perc")
    for thread in threads:
        thread.join(timeout=120)
    assert (engine.value("vllm:num_requests_running"), engine.value("vllm:num_requests_waiting")) == (0, 0)
    assert engine.value("vllm:kv_cache_usage_perc") == 0  # cached blocks nobody holds count as free


def test_a_full_kv_cache_queues_what_does_not_fit(start_engine) -> None:
    engine = start_engine("a", "--num-blocks", "8", "--decode-ms", "200")  # one request of 6 blocks at a time
    # different system prompts: no block is shared (a shared prefix would let both fit, as in vLLM)
    threads = [in_background(chat, engine, "fits alone", max_tokens=20, system=f"{index} {SYSTEM}")
               for index in range(2)]

    wait_for(lambda: (engine.value("vllm:num_requests_running"), engine.value("vllm:num_requests_waiting")) == (1, 1),
             timeout=30, message="one running and one waiting for blocks")
    assert engine.value("vllm:kv_cache_usage_perc") == 6 / 8
    for thread in threads:
        thread.join(timeout=120)


def test_lora_adapters_take_the_slots_and_wait_for_one(start_engine) -> None:
    engine = start_engine("a", "--max-loras", "1", "--lora", "sql", "--decode-ms", "100", "--num-blocks", "1000")
    assert requests.post(f"{engine.url}/v1/load_lora_adapter", json={"lora_name": "chat", "lora_path": "/a/chat"},
                         timeout=5).status_code == 200
    again = requests.post(f"{engine.url}/v1/load_lora_adapter", json={"lora_name": "chat", "lora_path": "/a/chat"},
                          timeout=5)
    assert again.status_code == 400 and "already been loaded" in again.json()["error"]["message"]
    listed = {item["id"]: item["parent"] for item in requests.get(f"{engine.url}/v1/models", timeout=5).json()["data"]}
    assert listed == {"llama-3.1-8b-instruct": None, "sql": "llama-3.1-8b-instruct", "chat": "llama-3.1-8b-instruct"}

    sql = in_background(chat, engine, "select", model="sql", max_tokens=30)
    wait_for(lambda: engine.metrics()["vllm:lora_requests_info"][0][0]["running_lora_adapters"] == "sql", timeout=30,
             message="the sql adapter running")
    other = in_background(chat, engine, "hello", model="chat", max_tokens=2)
    labels = wait_for(lambda: (info := engine.metrics()["vllm:lora_requests_info"][0][0])["waiting_lora_adapters"]
                      == "chat" and info, timeout=30, message="the chat adapter waiting for the one slot")
    assert (labels["running_lora_adapters"], labels["max_lora"]) == ("sql", "1")
    base = chat(engine, "the base model needs no slot", max_tokens=2)  # runs beside the adapter
    assert base["usage"]["completion_tokens"] == 2
    sql.join(timeout=120)
    other.join(timeout=120)
    assert engine.stats()["adapter:chat"] == 1 and engine.stats()["adapter:sql"] == 1

    gone = requests.post(f"{engine.url}/v1/unload_lora_adapter", json={"lora_name": "chat"}, timeout=5)
    assert gone.status_code == 200
    missing = requests.post(f"{engine.url}/v1/unload_lora_adapter", json={"lora_name": "chat"}, timeout=5)
    assert missing.status_code == 404 and "cannot be found" in missing.json()["error"]["message"]
    refused = requests.post(f"{engine.url}/v1/load_lora_adapter", json={"lora_name": ""}, timeout=5)
    assert refused.status_code == 400 and refused.json()["error"]["message"].startswith("lora_name:")
