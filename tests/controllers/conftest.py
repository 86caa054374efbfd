"""The cluster row of a controller test: the portal manages InferenceModel and InferenceRun there."""

from __future__ import annotations

import pytest

from clusters.models import Cluster
from tests.support.clusters import KubeCluster


@pytest.fixture
def managed(transactional_db, kube) -> tuple[KubeCluster, Cluster]:
    kube.name = "managed"
    return kube, kube.register(managed_kinds=["InferenceModel", "InferenceRun"])
