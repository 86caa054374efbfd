"""Status write-back through /status, against the real control plane over real HTTP."""

from __future__ import annotations

import pytest

from models_app.models import InferenceModel
from scheduler.rightsizing.refresh import refresh_cluster
from tests.rightsizing.factories import make_model
from tests.support.clusters import KubeCluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def kube(control_plane, fault_proxy):
    """The namespace ``default``: the Prometheus history of tests/rightsizing names it."""
    if control_plane is None:
        pytest.skip("needs the session's control plane")
    with control_plane.api_client() as api_client:
        cluster = KubeCluster(api_client, name="rs", plane=control_plane, proxy=fault_proxy, namespace="default")
        yield cluster
        cluster.close()


def _in_cluster(kube: KubeCluster, row: InferenceModel) -> None:
    manifest = row.to_manifest()
    manifest["status"] = {"ready": True, "replicas": 1, "recommendation": "stale text from before"}
    kube.write(manifest)


def test_refresh_writes_status_only_where_the_portal_manages_the_kind(kube, prometheus, end):
    cluster = kube.register(prometheus_url=prometheus.url)
    row = make_model(cluster, "llama-2-70b", "80Gi")
    _in_cluster(kube, row)
    spec_before = kube.read(InferenceModel.kube, "llama-2-70b")["spec"]

    assert refresh_cluster(cluster, at=end).ok  # not managed: mirror mode: the cluster is untouched
    assert kube.read(InferenceModel.kube, "llama-2-70b")["status"]["recommendation"] == "stale text from before"

    cluster.managed_kinds = ["InferenceModel"]
    cluster.save()
    refresh = refresh_cluster(cluster, at=end)
    assert refresh.ok and refresh.error == ""
    written = kube.read(InferenceModel.kube, "llama-2-70b")
    assert written["status"] == {
        "ready": True,
        "replicas": 1,
        "observedPeakMemory": "75Gi",
        "utilizationPercent": 93,
        "recommendation": "Consider reducing memory from 80Gi to 78Gi (observed peak 75Gi, 6% overprovisioned)",
        "lastObservation": end.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    assert written["spec"] == spec_before  # /status only


def test_a_failed_write_back_is_reported_and_the_observation_kept(kube, prometheus, end):
    cluster = kube.register(prometheus_url=prometheus.url)
    make_model(cluster, "llama-2-70b", "80Gi")  # never created in the cluster: 404 on write-back
    cluster.managed_kinds = ["InferenceModel"]
    cluster.save()
    refresh = refresh_cluster(cluster, at=end)
    assert refresh.ok
    assert refresh.error.startswith("status write-back failed for default/llama-2-70b: 404")
    assert refresh.observations.get().utilization_percent == 93
