"""``manage.py sync_watch`` as a process: it follows the cluster and what staff change about it, stops
cleanly on SIGTERM, and only one replica watches a cluster at a time (a Lease in the cluster)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import kubernetes
import pytest

from clusters.kube.client import ClusterGateway
from clusters.sync.leader import LeaseElector, LeaseTiming, lead_while, lease_name
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest, wait_for
from tests.support.services import REPO_ROOT, session_database_url


def start_watcher(cluster_name: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DATABASE_URL": session_database_url(),
        "DEBUG": "false",
        "PYTHONUNBUFFERED": "1",
    }
    return subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "sync_watch",
            "--cluster",
            cluster_name,
            "--rescan",
            "0.5",
            "--lease",
            "3",
            "2",
            "0.3",
            "--watch-timeout",
            "2",
            "3",
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def read_until(process: subprocess.Popen, text: str, timeout: float = 20) -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    while text not in seen:
        if time.monotonic() > deadline or process.poll() is not None:
            raise AssertionError(f"no {text!r} from the watcher; it said:\n{seen}")
        seen += process.stdout.readline()
    return seen


def test_watcher_process_follows_the_cluster_and_stops_on_sigterm(live_cluster, kube) -> None:
    process = start_watcher(live_cluster.name)
    try:
        read_until(process, f"watching {live_cluster.name}")
        kube.write(sample_manifest("inferencemodel-mistral-7b.yaml", kube.namespace))
        wait_for(
            lambda: InferenceModel.objects.filter(name="mistral-7b").exists(),
            timeout=20,
            message="the watcher process to record the new object",
        )
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        assert "stopped" in process.stdout.read()
        assert time.monotonic() - started < 15
    finally:
        if process.poll() is None:
            process.kill()


def test_the_watcher_follows_changes_of_the_cluster_without_a_restart(live_cluster, kube) -> None:
    process = start_watcher(live_cluster.name)
    try:
        read_until(process, f"watching {live_cluster.name}")
        other = f"{kube.namespace}-b"
        kubernetes.client.CoreV1Api(kube.api_client).create_namespace({"metadata": {"name": other}})
        live_cluster.namespaces = [kube.namespace, other]
        live_cluster.save()
        read_until(process, f"{live_cluster.name}: changed; following it")
        read_until(process, f"watching {live_cluster.name}")
        manifest = sample_manifest("inferencemodel-mistral-7b.yaml", other)
        kube.custom.create_namespaced_custom_object("inference.eh-ops.io", "v1alpha1", other, "inferencemodels",
                                                    manifest)
        wait_for(lambda: InferenceModel.objects.filter(namespace=other, name="mistral-7b").exists(), timeout=20,
                 message="an object of the namespace added while the watcher ran")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        kubernetes.client.CoreV1Api(kube.api_client).delete_namespace(f"{kube.namespace}-b")


def test_one_leader_at_a_time_and_a_lost_leader_stops_within_its_lease(live_cluster, kube, control_plane) -> None:
    """Two replicas elect on the cluster's Lease: one leads. When the leader's connection to the
    API server fails (503 from the proxy it goes through), it stops leading after its renew
    deadline, before the other takes over after the lease duration: never two at once."""
    if control_plane is None:
        pytest.skip("the leader's connection fails through the session's fault proxy")
    timing = LeaseTiming(lease_duration=3, renew_deadline=2, retry_period=0.2)
    through_proxy = ClusterGateway(live_cluster)  # the Cluster row points at the fault proxy
    direct = ClusterGateway(live_cluster, api_client=control_plane.api_client())
    first = LeaseElector(through_proxy, kube.namespace, "replica-a", timing)
    second = LeaseElector(direct, kube.namespace, "replica-b", timing)
    stop, a_leads, b_leads = threading.Event(), threading.Event(), threading.Event()
    threads = [threading.Thread(target=lead_while, args=(first, stop, a_leads)),
               threading.Thread(target=lead_while, args=(second, stop, b_leads))]
    try:
        threads[0].start()
        wait_for(a_leads.is_set, message="the first replica to lead")
        threads[1].start()
        started = time.monotonic()
        while time.monotonic() - started < 1.5:  # the second keeps trying while the first renews
            assert not b_leads.is_set()
            time.sleep(0.05)
        kube.proxy.inject("*", "leases", status=503, times=None)
        lost_at = time.monotonic()
        a_stopped_at = None
        while not b_leads.is_set():
            if a_stopped_at is None and not a_leads.is_set():
                a_stopped_at = time.monotonic()
            assert time.monotonic() - lost_at < 10, "the second replica never took over"
            time.sleep(0.02)
        took_over_at = time.monotonic()
        assert not a_leads.is_set() and a_stopped_at is not None and a_stopped_at < took_over_at
        lease = kubernetes.client.CoordinationV1Api(kube.api_client).read_namespaced_lease(lease_name(), kube.namespace)
        assert lease.spec.holder_identity == "replica-b" and lease.spec.lease_transitions == 1
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
        through_proxy.close()
        direct.close()


def test_renewals_keep_the_leases_labels_and_annotations(live_cluster, kube) -> None:
    """The Lease a deploy made (Helm's ownership metadata on it, as the chart makes it) keeps its
    labels and annotations however often the watcher takes and renews it, so a second
    ``helm install`` and a GitOps tool see the object they made."""
    metadata = {
        "name": lease_name(),
        "namespace": kube.namespace,
        "labels": {"app.kubernetes.io/managed-by": "Helm", "team": "ml"},
        "annotations": {"meta.helm.sh/release-name": "portal", "meta.helm.sh/release-namespace": kube.namespace},
    }
    leases = kubernetes.client.CoordinationV1Api(kube.api_client)
    leases.create_namespaced_lease(kube.namespace, {"metadata": metadata})
    gateway = ClusterGateway(live_cluster)
    elector = LeaseElector(gateway, kube.namespace, "replica-a", LeaseTiming(retry_period=0.1))
    try:
        versions = set()
        for _ in range(3):  # the take-over, then renewals
            assert elector.try_acquire_or_renew()
            lease = leases.read_namespaced_lease(lease_name(), kube.namespace)
            versions.add(lease.metadata.resource_version)
            assert lease.spec.holder_identity == "replica-a"
            assert lease.metadata.labels == metadata["labels"]
            assert lease.metadata.annotations == metadata["annotations"]
        assert len(versions) == 3  # each round wrote the Lease
        elector.release()
        lease = leases.read_namespaced_lease(lease_name(), kube.namespace)
        assert lease.spec.holder_identity is None and lease.metadata.labels == metadata["labels"]
    finally:
        gateway.close()
