"""The usage ledger through the real gateway: real backend processes, the official client, rows in
the test database (PostgreSQL: COPY into the month's partition)."""

from __future__ import annotations

import openai
import pytest
import requests
from django.db import connection

from governance.models import RequestRecord
from tests.clusters.conftest import wait_for
from tests.gateway.conftest import RunningGateway, metrics_text, serve_model
from tests.governance.conftest import metric_value
from tests.support.tcp_relay import TcpRelay

pytestmark = pytest.mark.django_db(transaction=True)


def chat(client: openai.OpenAI, model: str, text: str, **options):
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}], **options)


def test_plain_and_streamed_answers_land_in_the_ledger_with_the_backends_counts(
    cluster, gateway, api_key, start_backend
) -> None:
    backend = start_backend("replica-a")
    model = serve_model(cluster, "meta-llama/Llama-3-8B", backend.url)
    client = gateway.client(api_key)
    before = metrics_text(gateway)  # the gateway process serves the whole session: count this test's share

    def counted(name: str, **labels: str) -> float:
        return metric_value(metrics_text(gateway), name, **labels) - metric_value(before, name, **labels)

    plain = chat(client, model.model_name, "secret plan alpha", max_tokens=2)
    assert plain.usage.completion_tokens == 2
    # The client did not ask for usage: the gateway asked the backend for it, and took the chunk out.
    unasked = list(chat(client, model.model_name, "secret plan beta gamma", stream=True))
    assert unasked and all(chunk.choices and chunk.usage is None for chunk in unasked)
    assert "".join(chunk.choices[0].delta.content for chunk in unasked).split() == ["secret", "plan", "beta", "gamma"]
    asked = list(chat(client, model.model_name, "one two three", stream=True, stream_options={"include_usage": True}))
    assert asked[-1].choices == [] and asked[-1].usage.completion_tokens == 3

    rows = wait_for(lambda: list(RequestRecord.objects.order_by("started_at")) if
                    RequestRecord.objects.count() == 3 else None, message="three ledger rows")
    assert [(row.stream, row.prompt_tokens, row.completion_tokens, row.status) for row in rows] == [
        (False, 2, 2, 200), (True, 4, 4, 200), (True, 3, 3, 200)
    ]
    for row in rows:
        assert (row.team, row.username, row.token_name, row.model) == ("team-a", "alice", "gateway-tests",
                                                                       "team-a/meta-llama/Llama-3-8B")
        assert (row.cluster_id, row.namespace) == (cluster.pk, "team-a")
        assert row.latency_ms > 0 and row.first_byte_ms is not None and row.first_byte_ms <= row.latency_ms
    # never the prompt or the answer
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {RequestRecord._meta.db_table}")
        assert "secret" not in repr(cursor.fetchall())
    llama = "team-a/meta-llama/Llama-3-8B"
    assert counted("inference_portal_team_requests_total", model=llama, status="200", team="team-a") == 3
    assert counted("inference_portal_team_tokens_total", model=llama, team="team-a",
                   type="completion") == 9


def test_refused_and_failed_requests_are_recorded_too(cluster, gateway, api_key, start_backend) -> None:
    backend = start_backend("broken", fail=503)
    serve_model(cluster, "broken-model", backend.url)
    with pytest.raises(openai.InternalServerError):
        chat(gateway.client(api_key), "broken-model", "hello")
    row = wait_for(lambda: RequestRecord.objects.filter(model="team-a/broken-model").first(),
                   message="the failed request")
    assert (row.status, row.prompt_tokens, row.completion_tokens) == (503, 0, 0)


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="COPY to PostgreSQL")
def test_database_stopped_mid_load_loses_no_request_and_counts_what_it_could_not_write(
    cluster, gateway_settings, api_key, start_backend
) -> None:
    """The writer's PostgreSQL goes away (a relay in front of the shared server is cut) while
    requests go on: every request is answered, the ledger keeps what its queue holds and writes it
    once the database is back, and the rows beyond the queue are counted as lost."""
    backend = start_backend("replica-a")
    serve_model(cluster, "steady", backend.url)
    database = connection.settings_dict
    relay = TcpRelay(database.get("HOST") or "127.0.0.1", int(database.get("PORT") or 5432)).start()
    gateway_settings.USAGE_LEDGER_DATABASE_URL = (
        f"postgres://{database['USER']}:{database['PASSWORD']}@127.0.0.1:{relay.port}/{database['NAME']}"
    )
    gateway_settings.USAGE_LEDGER_QUEUE_ROWS = 10
    running = RunningGateway().start()
    try:
        lost_before = metric_value(metrics_text(running), "inference_portal_usage_ledger_lost_rows_total")
        client = running.client(api_key)
        for _ in range(5):
            chat(client, "steady", "before")
        wait_for(lambda: RequestRecord.objects.count() == 5, message="the first rows written")
        relay.cut()
        for _ in range(30):  # the database is away: every request still answered
            assert chat(client, "steady", "during").choices[0].message.content == "during"
        lost = metric_value(metrics_text(running), "inference_portal_usage_ledger_lost_rows_total") - lost_before
        assert lost == 20  # the queue held 10 rows; the other 20 were counted, not silently dropped
        relay.restore()
        wait_for(lambda: RequestRecord.objects.count() == 15, timeout=60, message="the queued rows written")
        assert RequestRecord.objects.count() + lost == 35
    finally:
        running.stop()
        relay.close()
    assert requests.get(f"{backend.url}/stats", timeout=5).json()["/v1/chat/completions"] == 35
