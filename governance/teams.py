"""Which team a model or a request belongs to, from the namespace grants (accounts.models).

A model belongs to the team that owns its namespace: the team whose grant covers it with edit
access, the most specific grant winning (a named namespace before ``*``, a named cluster before
every cluster), then the team's name. A request is counted for the caller's team through which
the model was reached, by the same ranking among the caller's own teams' grants; a caller none
of whose teams grants the namespace (staff) is counted for their first team, else for no team.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from accounts.models import ALL_NAMESPACES, NamespaceGrant, Team


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
    _teams: dict[tuple[int, str], tuple[str, int | None]] = field(default_factory=dict, compare=False)

    def team_for(self, cluster_id: int, namespace: str) -> tuple[str, int | None]:
        """The team (name, id) a request for a model in this namespace is counted for; ("", None): none.
        Worked out once per namespace (the grants do not change for the life of this object)."""
        known = self._teams.get((cluster_id, namespace))
        if known is None:
            name = best_team(self.grants, cluster_id, namespace) or (self.names[0] if self.names else "")
            known = self._teams[(cluster_id, namespace)] = (name, self.ids.get(name))
        return known


class Directory:
    """Every team, its members and its grants, read in one go: what the gateway needs to count any
    caller's request for a team without a query. ``CallerTeams`` of a user are built on first use
    and kept with the directory (a new directory is read whenever teams, members or grants change)."""

    def __init__(self, teams: dict[str, int], members: dict[int, tuple[str, ...]], all_grants: Iterable[Grant]) -> None:
        self.teams = teams
        self.members = members
        self.grants_of: dict[str, list[Grant]] = {}
        for grant in all_grants:
            self.grants_of.setdefault(grant.team, []).append(grant)
        self._callers: dict[int, CallerTeams] = {}

    def caller(self, user_id: int) -> CallerTeams:
        known = self._callers.get(user_id)
        if known is None:
            names = tuple(sorted(self.members.get(user_id, ())))
            mine = tuple(grant for name in names for grant in self.grants_of.get(name, ()))
            known = self._callers[user_id] = CallerTeams(names, {name: self.teams[name] for name in names}, mine)
        return known


def load_directory() -> Directory:
    """Three queries, whatever the number of users: teams, memberships (each with its team's name,
    joined: a team created between two separate reads would name none), grants."""
    teams = dict(Team.objects.values_list("name", "pk"))
    members: dict[int, list[str]] = {}
    for user_id, team_name, team_id in Team.members.through.objects.values_list("user_id", "team__name", "team_id"):
        members.setdefault(user_id, []).append(team_name)
        teams.setdefault(team_name, team_id)
    return Directory(teams, {user: tuple(of) for user, of in members.items()}, grants())
