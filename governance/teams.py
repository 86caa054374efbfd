"""Which team a model or a request belongs to, from the namespace grants (accounts.models).

A model belongs to the team that owns its namespace: the team whose grant covers it with edit
access, the most specific grant winning (a named namespace before ``*``, a named cluster before
every cluster), then the team's name. A request is counted for the caller's team through which
the model was reached, by the same ranking among the caller's own teams' grants; a caller none
of whose teams grants the namespace (staff) is counted for their first team, else for no team.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from accounts.models import ALL_NAMESPACES, NamespaceGrant


@dataclass(frozen=True)
class Grant:
    team: str
    cluster_id: int | None
    namespace: str
    edit: bool

    def covers(self, cluster_id: int, namespace: str) -> bool:
        return self.cluster_id in (None, cluster_id) and self.namespace in (ALL_NAMESPACES, namespace)

    def rank(self) -> tuple[bool, bool, bool, str]:
        return (not self.edit, self.namespace == ALL_NAMESPACES, self.cluster_id is None, self.team)


def grants(rows: Iterable[NamespaceGrant] | None = None) -> list[Grant]:
    rows = NamespaceGrant.objects.select_related("team") if rows is None else rows
    return [Grant(row.team.name, row.cluster_id, row.namespace, row.access == NamespaceGrant.Access.EDIT)
            for row in rows]


def best_team(candidates: Iterable[Grant], cluster_id: int, namespace: str, edit_only: bool = False) -> str | None:
    covering = [grant for grant in candidates if grant.covers(cluster_id, namespace) and (grant.edit or not edit_only)]
    return min(covering, key=Grant.rank).team if covering else None


@dataclass(frozen=True)
class CallerTeams:
    """A user's teams (names, sorted) and their grants: what request attribution needs."""

    names: tuple[str, ...]
    ids: dict[str, int]
    grants: tuple[Grant, ...]

    def team_for(self, cluster_id: int, namespace: str) -> tuple[str, int | None]:
        """The team (name, id) a request for a model in this namespace is counted for; ("", None): none."""
        name = best_team(self.grants, cluster_id, namespace) or (self.names[0] if self.names else "")
        return name, self.ids.get(name)


def caller_teams(user_id: int) -> CallerTeams:
    rows = list(NamespaceGrant.objects.filter(team__members=user_id).select_related("team"))
    from accounts.models import Team

    teams = {team.name: team.pk for team in Team.objects.filter(members=user_id)}
    return CallerTeams(tuple(sorted(teams)), teams, tuple(grants(rows)))
