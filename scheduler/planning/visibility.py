"""Team-scoped views of planning results: a cluster's pools only for its teams, no other team's model.

A pool is shared by the teams of its cluster, so its budget, totals and nodes stay whole for them
(a team must see why its model does not fit); pools of clusters where the user's teams hold no
namespace are not shown at all. Models in namespaces the user cannot see lose their names and
every per-model figure (memory, right-sizing). ``visible`` is a ``(cluster_id, namespace) -> bool``
predicate (``accounts.access.namespace_predicate``) and ``clusters`` the ids of
``accounts.access.visible_cluster_ids``, so this module needs no user model and no team model.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from accounts.public import VIEW, everywhere, is_unrestricted, namespace_predicate, restrict, visible_cluster_ids
from clusters.kinds import with_article
from clusters.validation.schemas import FieldError
from scheduler.admission.accounting import HOLDERS_SHOWN, PoolAccount, pool_accounts
from scheduler.planning.pages import Answer, long_lists
from scheduler.planning.proposals import Proposal

Visible = Callable[[int, str], bool]
OTHER_TEAM = "a model of another team"


def team_accounts(accounts: list[PoolAccount], visible: Visible, clusters: set[int] | None) -> list[PoolAccount]:
    """Pools of the ``clusters`` (None: every one) with only visible holders; ``other_team_holders``
    counts the ones left out (here, or already in SQL by ``pool_accounts(restrict=...)``)."""
    accounts = [entry for entry in accounts if clusters is None or entry.cluster_id in clusters]
    for entry in accounts:
        shown = [holder for holder in entry.holders if visible(holder.cluster_id, holder.namespace)]
        entry.other_team_holders += len(entry.holders) - len(shown)
        entry.holders = shown
    return accounts


def hidden_proposals(
    proposals: list[Proposal], items: list[dict[str, Any]], cluster_name: str, visible: Visible
) -> list[FieldError]:
    """Existing models named by id that the user cannot see, worded exactly as an unknown id is (no leak)."""
    return [
        FieldError(f"{p.path}.id", item.get("id"), f"is not the id of {with_article(p.kind)} in cluster {cluster_name}")
        for p, item in zip(proposals, items, strict=True)
        if p.origin in ("existing", "edited") and not visible(p.cluster_id, p.namespace)
    ]


def redact_plan(result: Answer, cluster_id: int, visible: Visible, proposed: set[str]) -> Answer:
    """Hide models the user cannot see, except their own proposals: their labels (``Kind namespace/name``)
    become OTHER_TEAM and their own figures (memory, right-sizing, the detail naming them) are dropped.
    The long lists are redacted entry by entry as they are built (:meth:`Entries.then`), so only
    the entries shown are. A user who sees every namespace gets the plan as it is."""
    if visible is everywhere:
        return result

    def shown(value: str) -> bool:
        namespace = value.split(" ", 1)[-1].split("/", 1)[0]
        return value in proposed or visible(cluster_id, namespace)

    def name(value: str) -> str:
        return value if shown(value) else OTHER_TEAM

    def hiding(*figures: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def hide(entry: dict[str, Any]) -> dict[str, Any]:
            if not shown(entry["model"]):
                entry["model"] = OTHER_TEAM
                entry.update(dict.fromkeys(figures))
            return entry

        return hide

    hidden = {
        "overcommitted": name, "scale_to_zero": name, "unknown_pool": hiding("detail"),
        "models": hiding("memory_bytes", "gpus", "gpu_memory_bytes"), "unplaced": hiding("memory_bytes", "detail"),
        "rightsizing": hiding("from", "to", "saves_bytes"), "idle": hiding("frees_bytes", "idle_since"),
    }  # fmt: skip
    for entry in result["models"]:
        hiding("memory_bytes", "gpus")(entry)
    for _, owner, key in long_lists(result):
        owner[key] = owner[key].then(hidden[key])
    return result


def visible_pool_accounts(user: Any, cluster_id: int | None = None) -> list[PoolAccount]:
    """The pools' accounts (of one cluster, or all) as ``user`` may see them (the planning page and
    its API): for staff who see everything, from the kept totals with no restriction to apply; for
    others, their rows, with holders outside their namespaces redacted."""
    restricted = None if is_unrestricted(user) else partial(restrict, user=user, action=VIEW)
    visible = namespace_predicate(user)
    accounts = pool_accounts(cluster_id, restrict=restricted, per_pool=HOLDERS_SHOWN, visible=visible)
    return team_accounts(accounts, visible, visible_cluster_ids(user))
