"""Fixtures of the governance tests: the gateway's (real backends, a gateway serving in a thread),
the limits' Redis (this run's database, emptied of limit counters), a fast ledger writer."""

from __future__ import annotations

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from governance.limits import PREFIX
from tests.gateway.conftest import api_key, cluster, gateway, gateway_settings, start_backend  # noqa: F401
from tests.support.services import require_redis


@pytest.fixture
def limits_redis() -> redis.Redis:
    """The limits' Redis, without counters left by an earlier test."""
    client = redis.Redis.from_url(require_redis())
    for key in client.scan_iter(f"{PREFIX}:*"):
        client.delete(key)
    yield client
    client.close()


@pytest.fixture(autouse=True)
def governance_settings(settings, limits_redis):
    """Limits counted in the test Redis; ledger rows written within a few milliseconds."""
    from tests.support.services import REDIS_URL

    settings.GOVERNANCE_REDIS_URL = REDIS_URL
    settings.USAGE_LEDGER_FLUSH_SECONDS = 0.02
    settings.USAGE_LIMITS_TTL_SECONDS = 0
    return settings


@pytest.fixture
def light_reservations(settings):
    """Requests reserve their max_tokens and next to nothing for their prompt (listed before
    ``gateway``, which reads the setting when it starts): for tests of small budgets."""
    settings.USAGE_RESERVE_BYTES_PER_TOKEN = 100_000
    return settings


def metric_value(text: str, name: str, **labels: str) -> float:
    """One sample of a Prometheus exposition (0 when absent), whatever its labels' order."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0
