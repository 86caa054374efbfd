"""The planning page's rows written in Python (scheduler.templatetags.planning) are the HTML the
template loops they replace wrote, escaping included, in every case those loops had."""

from __future__ import annotations

from django.template import Context, Template

from scheduler.admission.accounting import PoolAccount
from scheduler.holdings import Holding
from tests.scheduler.conftest import GI

LOOPS = Template(
    "{% load memory usage %}"
    "{% for account in accounts %}\n"
    "    <tr><td>{{ account.cluster_name }}/{{ account.pool }}</td>\n"
    "        <td>{% usage_bar account.committed_bytes account.budget_bytes %}</td>\n"
    "        <td>{{ account.budget_bytes|gib }}</td><td>{{ account.allocated_bytes|gib }}</td>\n"
    "        <td>{{ account.reserved_bytes|gib }}</td><td>{{ account.observed_bytes|gib }}</td>\n"
    "        <td>{{ account.free_bytes|gib }}</td><td>{{ account.gpus_used }}</td>"
    "<td>{{ account.rightsizing_savings_bytes|gib }}</td>\n"
    "        <td>{% for holder in account.holders %}{{ holder.namespace }}/{{ holder.name }} "
    "({{ holder.memory_bytes|gib }}{% if holder.gpu_count %}, {{ holder.gpu_count }} "
    "GPU{{ holder.gpu_count|pluralize }}{% endif %}){% if not forloop.last %}, {% endif %}"
    "{% empty %}{% if not account.other_team_holders %}none{% endif %}{% endfor %}"
    "{% if account.holders_total > account.holders|length %} ({{ account.holders|length }} of "
    "{{ account.holders_total }} shown){% endif %}{% if account.other_team_holders %}"
    "{% if account.holders %}; {% endif %}{{ account.other_team_holders }} model(s) of other teams{% endif %}"
    "</td></tr>\n  {% endfor %}"
    "|{% for node in nodes %}\n"
    "      <tr><td>{{ node.name }}</td><td>{{ node.capacity_bytes|gib }}</td><td>{{ node.used_bytes|gib }}</td>"
    "<td>{{ node.free_bytes|gib }}</td>\n"
    "          <td>{{ node.used_gpus }}{% if node.gpus is not None %} / {{ node.gpus }}{% endif %}</td>\n"
    "          <td>{% for item in node.models %}{{ item.model }} <small>({{ item.origin }})</small>"
    "{% if not forloop.last %}, {% endif %}{% endfor %}{% if node.models_more %} and {{ node.models_more }} more"
    "{% endif %}</td></tr>\n    {% endfor %}"
)
TAGS = Template("{% load planning %}{% account_rows accounts %}|{% node_rows nodes %}")


def holder(name: str, memory: int, gpus: int = 0, namespace: str = "team<a>") -> Holding:
    return Holding("InferenceModel", 1, 1, namespace, name, "gpu", memory, 1, gpu_count=gpus)


def test_the_rows_are_the_loops_html():
    accounts = [
        PoolAccount(1, "east", "gpu & co", 100 * GI, allocated_bytes=40 * GI, reserved_bytes=5 * GI,
                    observed_bytes=30 * GI, rightsizing_savings_bytes=GI, gpus_used=3,
                    holders=[holder("big<b>", 30 * GI, 2), holder("one", 8 * GI, 1), holder("cpu", 2 * GI)],
                    holders_total=7, other_team_holders=4),
        PoolAccount(1, "east", "over", 10 * GI, allocated_bytes=25 * GI, holders=[holder("x", 25 * GI)],
                    holders_total=1),
        PoolAccount(2, "west", "empty", None),
        PoolAccount(2, "west", "theirs", 50 * GI, other_team_holders=2),
    ]  # fmt: skip
    nodes = [
        {"name": "n<1>", "capacity_bytes": 64 * GI, "used_bytes": 60 * GI, "free_bytes": 4 * GI, "gpus": 8,
         "used_gpus": 6, "models": [{"model": "Kind ns/a<b>", "origin": "running"},
                                    {"model": "Estimate ns/new", "origin": "estimate"}], "models_more": 12},
        {"name": "n2", "capacity_bytes": 32 * GI, "used_bytes": 0, "free_bytes": 32 * GI, "gpus": None,
         "used_gpus": 0, "models": []},
    ]  # fmt: skip
    context = Context({"accounts": accounts, "nodes": nodes})
    assert TAGS.render(context) == LOOPS.render(context)
    assert "&lt;b&gt;" in TAGS.render(context)
