"""A test API server whose cluster row lets the portal manage InferenceModel and InferenceRun."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from django.core.management import call_command

from clusters.models import Cluster
from tests.support.clusters import EmulatedCluster


class ManagedCluster(EmulatedCluster):
    """The emulated cluster plus the helpers a controller test needs (it plays the cluster's own controllers)."""

    def sync(self) -> str:
        """``manage.py sync --once``: resync, then one reconcile pass."""
        out = io.StringIO()
        call_command("sync", "--once", "--cluster", self.name, stdout=out)
        return out.getvalue()

    def builtin(self, group: str, plural: str, name: str, namespace: str = "default") -> dict | None:
        version = "v1"
        return self.server.get_object(group, version, plural, namespace, name)

    def set_status(self, group: str, plural: str, name: str, status: dict, namespace: str = "default") -> None:
        """Write an object's status as the cluster's own controller (Deployment, Job) would."""
        current = self.builtin(group, plural, name, namespace)
        current["status"] = status
        self.server.put_object(current, field_manager="kube-controller-manager")


@pytest.fixture
def managed(transactional_db) -> Iterator[tuple[ManagedCluster, Cluster]]:
    kube = ManagedCluster("managed")
    cluster = kube.register(managed_kinds=["InferenceModel", "InferenceRun"])
    yield kube, cluster
    kube.close()
