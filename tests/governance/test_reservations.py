"""Reservations no field can dodge: the caps and counts read as OpenAI validates them (a 400 naming
the field otherwise), the larger cap reserved and sent, ``stream`` a JSON boolean, and a stream
without its usage chunk counted from its events. Real gateway, real backend processes, Redis."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from accounts.models import Team
from governance.bodies import MAX_TOKENS, Asked, BodyRefused, asked, capped, reservation
from governance.limits import PREFIX
from governance.models import Limit, RequestRecord
from governance.sse import UsageTap
from tests.clusters.conftest import wait_for
from tests.gateway.conftest import serve_model
from tests.governance.test_limits import ask, away_from_minute_end


def test_the_reservation_is_the_largest_cap_any_engine_honours_times_the_completions() -> None:
    assert reservation(asked({"max_tokens": 50}, "/v1/chat/completions"), 400, 1024, 4) == 150
    both = asked({"max_completion_tokens": 20, "max_tokens": 50}, "/v1/chat/completions")
    assert reservation(both, 400, 1024, 4) == 150  # an engine that reads only max_tokens generates 50
    both = asked({"max_completion_tokens": 500, "max_tokens": 50}, "/v1/chat/completions")
    assert reservation(both, 400, 1024, 4) == 600  # vLLM reads max_completion_tokens first
    assert reservation(asked({}, "/v1/chat/completions"), 401, 1024, 4) == 1024 + 101  # a byte more rounds up
    assert reservation(asked({"max_tokens": 10, "n": 3}, "/v1/chat/completions"), 4, 1024, 4) == 31
    assert reservation(asked({"max_tokens": 10, "n": 2, "best_of": 5}, "/v1/completions"), 4, 1024, 4) == 51
    prompts = asked({"max_tokens": 10, "prompt": ["a", "b", "c"]}, "/v1/completions")
    assert reservation(prompts, 4, 1024, 4) == 31  # one completion per prompt of a list
    assert asked({"max_tokens": 10, "prompt": [1, 2, 3]}, "/v1/completions").completions == 1  # one token list
    assert asked({"max_tokens": None, "stream": None}, "/v1/completions") == Asked(None, 1, False)  # null: absent
    assert reservation(Asked(None, 0, False), 400, 1024, 4, generates=False) == 100  # embeddings


@pytest.mark.parametrize(("field", "value", "code"), [
    ("max_tokens", 10.0, "invalid_type"), ("max_tokens", "10", "invalid_type"), ("max_tokens", True, "invalid_type"),
    ("max_tokens", 0, "integer_below_min_value"), ("max_tokens", -5, "integer_below_min_value"),
    ("max_tokens", MAX_TOKENS + 1, "integer_above_max_value"), ("max_completion_tokens", 1.5, "invalid_type"),
    ("max_completion_tokens", [10], "invalid_type"), ("n", "2", "invalid_type"), ("n", 129, "integer_above_max_value"),
    ("best_of", 0, "integer_below_min_value"), ("stream", 1, "invalid_type"), ("stream", "true", "invalid_type"),
    ("stream", 0, "invalid_type"),
])  # fmt: skip
def test_a_value_an_engine_would_read_laxly_is_refused_naming_the_field(field, value, code) -> None:
    with pytest.raises(BodyRefused) as refused:
        asked({"max_tokens": 5, field: value}, "/v1/chat/completions")
    assert (refused.value.param, refused.value.code) == (field, code)
    assert f"'{field}'" in str(refused.value)


def test_the_cap_sent_upstream_is_the_one_reserved() -> None:
    assert capped({}, Asked(None, 1, False), 64) == {"max_tokens": 64}
    assert capped({"max_completion_tokens": 7}, Asked(7, 1, False), 64) == {"max_tokens": 7}
    assert capped({"max_tokens": 9, "max_completion_tokens": 70}, Asked(70, 1, False), 64) == {}


def test_a_streams_events_are_counted_however_it_is_cut() -> None:
    events = b"".join(b'data: {"choices":[{"delta":{"content":"w%d"}}]}\n\n' % index for index in range(7))
    whole = b'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\n' + events + b"data: [DONE]\n\n"
    for size in (1, 2, 3, 5, 6, 7, 13, len(whole)):
        tap = UsageTap(strip=False)
        for start in range(0, len(whole), size):
            tap.feed(whole[start:start + size])
        assert (tap.streamed, tap.done) == (8, True), size  # 7 tokens and the role-only chunk, counted as one
    tap = UsageTap(strip=False)
    tap.feed(b'data: {"choices":[{"delta":{"content":"data: \\ndata: x"}}]}\n\n')  # "data:" inside an event
    assert (tap.events, tap.streamed) == (1, 1)  # a stream cut before [DONE]: every event counted


@pytest.mark.django_db(transaction=True)
def test_fields_no_engine_reads_as_the_gateway_does_are_refused_before_the_backend(
    cluster, gateway, api_key, start_backend
) -> None:
    backend = start_backend("replica-a")
    serve_model(cluster, "strict", backend.url)
    for field, value in (("stream", 1), ("stream", "true"), ("max_tokens", 2.0), ("max_tokens", "1000"),
                         ("max_tokens", -1), ("max_tokens", 10**12), ("max_completion_tokens", "5"), ("n", 1.0)):
        answer = ask(gateway, api_key, "strict", **{field: value})
        assert answer.status_code == 400, (field, value, answer.text)
        error = answer.json()["error"]
        assert (error["type"], error["param"]) == ("invalid_request_error", field)
        assert f"'{field}'" in error["message"]
    assert ask(gateway, api_key, "strict", stream=False, max_tokens=2).status_code == 200
    assert backend.stats() == {"/v1/chat/completions": 1}  # none of the refused reached it


@pytest.mark.django_db(transaction=True)
def test_both_caps_present_reserve_the_larger_under_a_budget(
    cluster, light_reservations, gateway, api_key, start_backend, limits_redis
) -> None:
    """The issue's case: max_completion_tokens 10 and max_tokens 100 to an engine that reads
    max_tokens. 20 requests at once, each held 1 s, under a budget of 1,000 tokens: no more may be
    in flight than 1,000 tokens of reservations allow, so the completions served stay within it."""
    backend = start_backend("replica-a", think=1.0)
    serve_model(cluster, "budgeted", backend.url)
    Limit.objects.create(team=Team.objects.get(name="team-a"), monthly_tokens=1_000)
    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda _: ask(gateway, api_key, "budgeted", max_completion_tokens=10, max_tokens=100),
                                range(20)))
    served = [answer.json()["usage"]["completion_tokens"] for answer in answers if answer.status_code == 200]
    assert served and all(tokens == 100 for tokens in served)  # the engine honoured max_tokens
    assert sum(served) <= 1_000 and len(served) <= 1_000 // 101  # each reserved 100 + 1 for its prompt
    assert {answer.status_code for answer in answers} == {200, 429}


@pytest.mark.django_db(transaction=True)
def test_under_a_tokens_limit_every_engine_is_sent_the_cap_that_was_reserved(
    cluster, gateway_settings, light_reservations, api_key, start_backend
) -> None:
    from tests.gateway.conftest import RunningGateway

    gateway_settings.USAGE_RESERVE_COMPLETION_TOKENS = 4
    backend = start_backend("replica-a")
    serve_model(cluster, "limited", backend.url)
    serve_model(cluster, "free", backend.url)
    Limit.objects.create(team=Team.objects.get(name="team-a"), model="team-a/limited", tokens_per_minute=100_000)
    running = RunningGateway().start()
    try:
        words = [{"role": "user", "content": "a b c d e f g h i j"}]
        usage = ask(running, api_key, "limited", messages=words).json()["usage"]
        assert usage["completion_tokens"] == 4  # no cap: USAGE_RESERVE_COMPLETION_TOKENS, sent as max_tokens
        usage = ask(running, api_key, "limited", messages=words, max_completion_tokens=2).json()["usage"]
        assert usage["completion_tokens"] == 2  # an engine reading only max_tokens is sent the same cap
        usage = ask(running, api_key, "free", messages=words).json()["usage"]
        assert usage["completion_tokens"] == 10  # no tokens limit: the body goes as it came
    finally:
        running.stop()


@pytest.mark.django_db(transaction=True)
def test_a_stream_without_a_usage_chunk_is_counted_from_its_events(
    cluster, light_reservations, gateway, api_key, start_backend, limits_redis
) -> None:
    backend = start_backend("no-usage", hostile="no-usage")
    serve_model(cluster, "silent", backend.url)
    team = Team.objects.get(name="team-a")
    Limit.objects.create(team=team, tokens_per_minute=1_000_000)
    away_from_minute_end()
    words = " ".join(f"w{index}" for index in range(300))
    answer = ask(gateway, api_key, "silent", stream=True, max_tokens=300,
                 messages=[{"role": "user", "content": words}])
    assert answer.status_code == 200 and answer.text.count("data: ") == 301  # 300 tokens and [DONE]
    row = wait_for(lambda: RequestRecord.objects.filter(model="team-a/silent").first(), message="the stream's row")
    assert (row.stream, row.completion_tokens) == (True, 300)  # its events, less [DONE]
    assert row.prompt_tokens >= 1  # the prompt as reserved
    minute = int(time.time() // 60)
    # the reservation stands (300 + 1): nothing given back for an answer that reported no usage
    wait_for(lambda: int(limits_redis.get(f"{PREFIX}:t:{team.pk}:*:{minute}") or 0) == 301,
             message="the stream's reservation charged")
