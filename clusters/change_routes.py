"""Registry of change routes: where a portal edit goes instead of straight to the cluster.

By default every edit saved in the portal is applied to the cluster (``clusters.sync.outbound``).
A cluster or namespace run from Git (``gitops``) must not be written to: its GitOps engine would
revert the write, or the write would bypass review. The app that knows how to propose a change
instead (as a pull request) registers a route here from its ``ready()``, the way kinds register in
``clusters.kinds``; the apply consults it at the one place every write path ends, so no write path
can miss it. This registry sits at the bottom of ``clusters/`` so that the sync engine and the API
can ask it without importing the app above them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from django.db.models import Model


class ChangeRoute(Protocol):
    """What a route offers (rows are KubeObjects, named by Django's base class to avoid a circle)."""

    def diverts(self, obj: Model) -> bool:
        """Whether changes to ``obj`` go through this route rather than to the cluster."""

    def propose(self, obj: Model) -> str:
        """Carry the row's intent (an edit, or a delete when it is ``Deleting``) along the route;
        returns what was done, in words. Raises the Kubernetes client's ``TransientError`` to be
        retried and its ``PermanentError`` to fail the row with the message."""

    def describe(self, obj: Model) -> dict[str, Any] | None:
        """What the route knows of ``obj`` for the API and the pages (a pending change, drift), or None."""

    def describe_many(self, objs: Iterable[Model]) -> dict[tuple[str, int], dict[str, Any] | None]:
        """``describe`` of each object, by (kind, id), in a number of queries that does not grow with them."""


_route: ChangeRoute | None = None


def register_change_route(route: ChangeRoute) -> None:
    """Install the route (one per installation; a second registration replaces the first)."""
    global _route
    _route = route


def change_route() -> ChangeRoute | None:
    """The installed route, or None: every change goes to the cluster."""
    return _route
