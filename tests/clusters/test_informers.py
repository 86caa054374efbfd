"""Informer caches on the real control plane (issue 44, item 7): one list, then a watch from its
resourceVersion; reads cost no request; another writer's change arrives through the watch; a
resourceVersion etcd compacted away relists; the process's own writes are read back at once; the model
page's live panel and the Warning Events' aggregation read from them. Requests are counted at the
fault proxy the portal reaches the cluster through."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import kubernetes
import pytest
from django.utils import timezone

from clusters.kube.client import ClusterGateway
from clusters.kube.failures import record_event
from clusters.kube.informers import Informer, informer, selector_matches
from clusters.kube.live import live_objects
from clusters.kube.watching import WatchSettings
from clusters.sync.resync import resync_cluster
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest, wait_for


@pytest.fixture
def managed(transactional_db, kube) -> tuple:
    return kube, kube.register(managed_kinds=["InferenceModel"])


def requests_during(kube, action) -> Counter:
    seen = len(kube.proxy.requests_seen)
    action()
    return Counter((r.verb, r.plural) for r in kube.proxy.requests_seen[seen:])


def config_map(kube, name: str, **data: str) -> None:
    kubernetes.client.CoreV1Api(kube.api_client).create_namespaced_config_map(
        kube.namespace, {"metadata": {"name": name, "labels": {"app": name}}, "data": data})


def names(shared) -> list[str]:
    return [item["metadata"]["name"] for item in shared.items()]


@pytest.mark.parametrize(("labels", "selector", "matches"), [
    ({"a": "b"}, "", True), ({"a": "b"}, "a=b", True), ({"a": "b"}, "a==b", True), ({"a": "b"}, "a=c", False),
    ({"a": "b"}, "a", True), ({}, "a", False), ({"a": "b"}, "a!=b", False), (None, "a!=b", True),
    ({"a": "b", "c": "d"}, "a=b, c=d", True), ({"a": "b"}, "a=b,c=d", False),
])
def test_equality_selectors_match_as_the_api_server_does(labels, selector, matches) -> None:
    assert selector_matches(labels, selector) is matches


def test_an_informer_lists_once_then_follows_the_watch(kube, live_cluster, needs_faults) -> None:
    config_map(kube, "first")
    opened = requests_during(kube, lambda: informer(live_cluster, "v1", "ConfigMap", kube.namespace))
    assert opened[("list", "configmaps")] == 1, opened
    shared = informer(live_cluster, "v1", "ConfigMap", kube.namespace)
    assert "first" in names(shared)
    wait_for(lambda: kube.proxy.open_watches("configmaps"), message="the informer's watch")

    config_map(kube, "second")  # another writer: the watch brings it, no read asks for it
    wait_for(lambda: "second" in names(shared), message="the watched create")
    kubernetes.client.CoreV1Api(kube.api_client).delete_namespaced_config_map("first", kube.namespace)
    wait_for(lambda: "first" not in names(shared), message="the watched delete")
    reads = requests_during(kube, lambda: [informer(live_cluster, "v1", "ConfigMap", kube.namespace).items()
                                           for _ in range(50)])  # fmt: skip
    assert reads == {}, reads

    assert names(shared) == ["second"]


def test_an_expired_resource_version_relists_and_the_cache_is_the_clusters_again(kube, live_cluster, needs_faults,
                                                                                  control_plane) -> None:
    """The watch resumes from a resourceVersion etcd compacted away: the API server answers 410 and
    the informer relists (the sync watcher's loop), so what changed meanwhile is in the cache."""
    shared = Informer(live_cluster, "v1", "ConfigMap", kube.namespace,
                      settings=WatchSettings(timeout_range=(1, 2))).start()  # streams that end within seconds
    try:
        shared.wait_synced(30)
        config_map(kube, "before")
        wait_for(lambda: "before" in names(shared), message="the watched create")
        control_plane.compact()
        shared.resource_version = "1"  # the next stream starts there: long compacted
        wait_for(lambda: shared.relists >= 2, timeout=60, message="a relist after the 410")
        config_map(kube, "after")
        wait_for(lambda: names(shared) == ["after", "before"], message="the watch from the relist")
    finally:
        shared.stop.set()


def test_a_write_answer_the_watch_overtook_does_not_put_the_cache_back(kube, live_cluster) -> None:
    """The process writes, and before it hands the answer to its caches the object's controller
    moves the object on and the watch brings that: the answer, older, must not replace it (the
    cache would hold the past until the object changed again, found by a reconcile in CI)."""
    shared = informer(live_cluster, "v1", "ConfigMap", kube.namespace)
    config_map(kube, "moving", step="1")
    wait_for(lambda: "moving" in names(shared), message="the watched create")
    core = kubernetes.client.CoreV1Api(kube.api_client)
    answer = core.patch_namespaced_config_map("moving", kube.namespace, {"data": {"step": "2"}})
    core.patch_namespaced_config_map("moving", kube.namespace, {"data": {"step": "3"}})  # the controller's
    wait_for(lambda: shared.get(kube.namespace, "moving")["data"] == {"step": "3"}, message="the watched change")
    shared.wrote(kube.api_client.sanitize_for_serialization(answer))  # the process's write, handed over late
    assert shared.get(kube.namespace, "moving")["data"] == {"step": "3"}
    newer = core.patch_namespaced_config_map("moving", kube.namespace, {"data": {"step": "4"}})
    shared.wrote(kube.api_client.sanitize_for_serialization(newer))  # handed over before the watch brings it
    assert shared.get(kube.namespace, "moving")["data"] == {"step": "4"}


def test_a_cluster_that_cannot_be_listed_fails_its_first_reader_at_once(kube, live_cluster, needs_faults) -> None:
    kube.proxy.inject("list", "pods", status=403, times=None, message="pods are not for you")
    with pytest.raises(Exception, match="pods are not for you"):
        informer(live_cluster, "v1", "Pod", kube.namespace)


def test_a_warning_event_is_counted_from_the_cache_with_no_list(managed, needs_faults) -> None:
    """The aggregation key is looked up in the Events informer: the second identical Warning is one
    PATCH (count 2), the third within the repeat window sends nothing."""
    kube, cluster = managed
    model = kube.write(sample_manifest("inferencemodel-llama-2-7b.yaml", kube.namespace))
    gateway = ClusterGateway(cluster)
    now = timezone.now()
    try:
        record_event(gateway, InferenceModel.kube, model, "Warning", "Tested", "a message", now)
        again = requests_during(kube, lambda: record_event(gateway, InferenceModel.kube, model, "Warning", "Tested",
                                                           "a message", now + timedelta(minutes=10),
                                                           repeat_after=timedelta(minutes=5)))  # fmt: skip
        assert again == {("patch", "events"): 1}, again
        held = requests_during(kube, lambda: record_event(gateway, InferenceModel.kube, model, "Warning", "Tested",
                                                          "a message", now + timedelta(minutes=11),
                                                          repeat_after=timedelta(minutes=5)))  # fmt: skip
        assert held == {}, held
    finally:
        gateway.close()
    (event,) = [e for e in kubernetes.client.CoreV1Api(kube.api_client).list_namespaced_event(kube.namespace).items
                if e.reason == "Tested"]  # fmt: skip
    assert event.count == 2


def test_the_live_panel_reads_the_caches_after_its_first_view(managed, needs_faults) -> None:
    """The model page's live panel (and a followed log's ownership check): the first view lists the
    namespace's workloads, pods and events once each; the views after send no request."""
    kube, cluster = managed
    kube.write(sample_manifest("inferencemodel-llama-2-7b.yaml", kube.namespace))
    resync_cluster(cluster)
    row = InferenceModel.objects.get(name="llama-2-7b")
    first = requests_during(kube, lambda: live_objects(row))
    assert {plural for verb, plural in first if verb == "list"} == {
        "deployments", "replicasets", "cronjobs", "jobs", "pods", "events"}, first
    assert all(count == 1 for count in first.values()), first
    for plural in ("deployments", "replicasets", "cronjobs", "jobs", "pods", "events"):
        wait_for(lambda plural=plural: kube.proxy.open_watches(plural), message=f"the informer's watch of {plural}")
    later = requests_during(kube, lambda: [live_objects(row) for _ in range(5)])
    assert not [key for key in later if key[0] != "watch"], later  # no list, no read: a watch may re-open
