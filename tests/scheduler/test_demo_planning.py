"""The demo tells one planning story: every sample sits in a pool that holds it, no pool is over
its budget, the planning page's own example fits, and an over-committed pool shows without
spilling out of its table cell."""

from __future__ import annotations

import io
import re

import pytest
import yaml
from django.core.management import call_command
from django.test import Client

from clusters.models import Cluster
from scheduler.admission.accounting import PoolAccount, pool_accounts
from scheduler.forms import PLAN_EXAMPLE
from scheduler.models import NodePool
from scheduler.planning.planner import plan, plan_to_dict
from scheduler.planning.proposals import proposal_from_request
from scheduler.refresh import store_pools
from scheduler.templatetags.usage import pool_totals_rows, usage_bar

GI = 1024**3


@pytest.fixture
def demo(db) -> Cluster:
    call_command("load_demo", stdout=io.StringIO())
    return Cluster.objects.get(name="demo")


def test_no_demo_pool_is_over_budget_and_every_running_model_has_a_node(demo):
    accounts = {a.pool: a for a in pool_accounts(demo.pk)}
    assert {"gpu-a100", "gpu-l4", "gpu-h100", "gpu-l40s", "default"} <= set(accounts)
    for account in accounts.values():
        assert account.budget_bytes is not None, account.pool
        assert account.committed_bytes <= account.budget_bytes, (account.pool, account.committed_bytes)
    assert accounts["gpu-h100"].allocated_bytes == 512 * GI  # decode 1 x 256Gi + prefill 2 x 128Gi
    assert accounts["gpu-h100"].gpus_used == 8 + 2 * 4
    assert accounts["gpu-l4"].gpus_used == 1  # the KubeAI model's nvidia-gpu-l4:1, replicas from status
    assert len(plan_to_dict(plan(demo, []))["overcommitted"]) == 0


def test_the_planning_pages_own_example_fits_in_the_demo(demo):
    proposals = [proposal_from_request(item, index, demo) for index, item in enumerate(yaml.safe_load(PLAN_EXAMPLE))]
    result = plan_to_dict(plan(demo, proposals))
    assert result["fits"] is True, result
    assert result["proposal"][0]["nodes"]  # it has a node in gpu-l4


def test_planning_page_draws_the_placement_chart_of_the_example(demo, make_user):
    client = Client()
    client.force_login(make_user("planner"))
    page = client.post("/planning/", {"cluster": "demo", "models": PLAN_EXAMPLE, "include_running": "on"})
    html = page.content.decode()
    assert "the proposal fits" in html
    assert "Placement: memory and GPU memory of each node" in html
    assert "gpu-l4/gpu-l4-node-1 GPUs" in html  # a GPU-memory bar beside the memory bar


def test_an_over_committed_pool_is_capped_at_the_bar_and_says_by_how_much():
    html = usage_bar(608 * GI, 96 * GI)
    assert 'class="bar over"' in html and "width: 100%" in html
    assert "633 %: over by 512.0 GiB" in html  # the old demo default pool
    assert re.search(r'width: 50%', usage_bar(48 * GI, 96 * GI))
    assert usage_bar(5, None) == "no budget"


def test_the_dashboards_pool_rows_say_each_pools_figures_escaped():
    over = PoolAccount(1, "prod", "gpu-<a100>", 96 * GI)
    over.allocated_bytes, over.reserved_bytes, over.gpus_used = 600 * GI, 8 * GI, 3
    unbudgeted = PoolAccount(2, "edge", "cpu", None)
    rows = str(pool_totals_rows([over, unbudgeted])).split("\n")
    assert rows[0] == (
        f"<tr><td>prod/gpu-&lt;a100&gt;</td><td>{usage_bar(608 * GI, 96 * GI)}</td><td>608.0 GiB</td>"
        "<td>96.0 GiB</td><td>-512.0 GiB</td><td>3</td></tr>"
    )
    assert rows[1] == "<tr><td>edge/cpu</td><td>no budget</td><td>0.0 GiB</td><td>—</td><td>—</td><td>0</td></tr>"


def test_a_pool_whose_nodes_are_gone_is_shown_as_such_and_is_no_capacity(demo, make_user):
    """Issue 43: the live demo's kwok cluster has no H100 node, so its refresh empties gpu-h100, where
    the ModelServices still declare 16 GPUs. The pool is named as having no nodes on the dashboard
    and the planning page, a budget staff set on it is no capacity (none free, no budget-only node),
    and nothing is planned into it."""
    store_pools(demo, {})  # the cluster's Nodes name no pool: every pool read from Nodes is emptied
    NodePool.objects.filter(cluster=demo, name="gpu-h100").update(budget_bytes=1024 * GI)  # staff's, kept
    account = {a.pool: a for a in pool_accounts(demo.pk)}["gpu-h100"]
    assert account.without_nodes and account.budget_bytes == 0 and account.free_bytes is None
    assert account.gpus_used == 8 + 2 * 4  # what the models declare, shown as declared
    staff = Client()
    staff.force_login(make_user("staff", staff=True))
    no_nodes = r'demo/gpu-h100</td>\s*<td><span class="no-nodes"[^>]*>no nodes</span></td>'
    assert re.search(no_nodes, staff.get("/").content.decode())
    assert re.search(no_nodes, staff.get("/planning/").content.decode())
    estimate = {"name": "h", "namespace": "default", "pool": "gpu-h100", "memory": "8Gi", "gpus": 1,
                "gpu_memory": "8Gi"}  # fmt: skip
    result = plan_to_dict(plan(demo, [proposal_from_request({"estimate": estimate}, 0, demo)]))
    assert result["fits"] is False and not result["proposal"][0]["nodes"]
