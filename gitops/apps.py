"""The gitops app: registers its change route with clusters/ so every write path is diverted."""

from __future__ import annotations

from django.apps import AppConfig


class GitopsConfig(AppConfig):
    name = "gitops"
    verbose_name = "GitOps"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """The apply of a row (``clusters.sync.outbound``) asks the route first; see clusters.change_routes."""
        from clusters.change_routes import register_change_route
        from gitops.route import GitRoute

        register_change_route(GitRoute())
