"""Charts are cached by their content: the same figures give the cached drawing, any change a new one."""

from __future__ import annotations

from scheduler.admission.accounting import PoolAccount
from scheduler.planning.charts import pool_usage_chart
from tests.scheduler.conftest import GI


def test_the_same_figures_reuse_the_drawing_and_a_changed_one_draws_anew(db):
    accounts = [PoolAccount(1, "prod", "gpu", 100 * GI, allocated_bytes=10 * GI)]
    first = pool_usage_chart(accounts)
    assert "prod/gpu" in first
    assert pool_usage_chart(accounts) == first
    accounts[0].allocated_bytes = 57 * GI
    changed = pool_usage_chart(accounts)
    assert changed != first and "57" in changed
    accounts[0].allocated_bytes = 10 * GI
    assert pool_usage_chart(accounts) == first
