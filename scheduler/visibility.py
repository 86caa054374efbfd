"""Team-scoped views of planning results: pool figures are shared, other teams' model names are not.

Pools are shared infrastructure, so budgets and totals stay whole (a team must see why its model
does not fit); the names of models in namespaces the user cannot see are replaced. ``visible`` is
a ``(cluster_id, namespace) -> bool`` predicate (``accounts.access.namespace_predicate``), so this
module needs no user model and no team model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clusters.validation import FieldError
from scheduler.accounting import PoolAccount
from scheduler.proposals import Proposal

Visible = Callable[[int, str], bool]
OTHER_TEAM = "a model of another team"


def team_accounts(accounts: list[PoolAccount], visible: Visible) -> list[PoolAccount]:
    """Keep only visible holders; ``other_team_holders`` counts the ones left out."""
    for entry in accounts:
        shown = [holder for holder in entry.holders if visible(holder.cluster_id, holder.namespace)]
        entry.other_team_holders = len(entry.holders) - len(shown)
        entry.holders = shown
        entry.stopped = [holder for holder in entry.stopped if visible(holder.cluster_id, holder.namespace)]
    return accounts


def hidden_proposals(
    proposals: list[Proposal], items: list[dict[str, Any]], cluster_name: str, visible: Visible
) -> list[FieldError]:
    """Existing models named by id that the user cannot see, worded exactly as an unknown id is (no leak)."""
    return [
        FieldError(f"{p.path}.id", item.get("id"), f"is not the id of a {p.kind} in cluster {cluster_name}")
        for p, item in zip(proposals, items, strict=True)
        if p.origin in ("existing", "edited") and not visible(p.cluster_id, p.namespace)
    ]


def redact_plan(result: dict[str, Any], cluster_id: int, visible: Visible, proposed: set[str]) -> dict[str, Any]:
    """Replace labels (``Kind namespace/name``) of models the user cannot see, except their own proposals."""

    def label(value: str) -> str:
        namespace = value.split(" ", 1)[-1].split("/", 1)[0]
        return value if value in proposed or visible(cluster_id, namespace) else OTHER_TEAM

    for entry in result["models"]:
        entry["model"] = label(entry["model"])
    for entry in result["unknown_pool"]:
        entry["model"] = label(entry["model"])
    for pool in result["pools"]:
        for node in pool["nodes"]:
            for item in node["models"]:
                item["model"] = label(item["model"])
        for miss in pool["unplaced"]:
            miss["model"] = label(miss["model"])
        suggestions = pool.get("suggestions") or {}
        if suggestions.get("scale_to_zero"):
            suggestions["scale_to_zero"] = [label(name) for name in suggestions["scale_to_zero"]]
        for change in suggestions.get("rightsizing") or []:
            change["model"] = label(change["model"])
    return result
