"""Fixtures for sync tests: the registered cluster row and a running watcher (``kube`` is in tests/conftest.py)."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings

from clusters.kube.watching import Backoff, WatchSettings
from clusters.models import Cluster
from clusters.sync.watcher import ClusterWatch


def sample_manifest(file_name: str, namespace: str = "default") -> dict[str, Any]:
    manifest = yaml.safe_load((Path(settings.SAMPLES_DIR) / file_name).read_text())
    manifest["metadata"]["namespace"] = namespace
    return manifest


def wait_for(condition: Callable[[], Any], timeout: float = 10.0, message: str = "condition") -> Any:
    """Poll until ``condition()`` is truthy; fail with ``message`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {message}")


@pytest.fixture
def needs_faults(kube) -> None:
    if not kube.supports_faults:
        pytest.skip("fault injection needs the session's control plane (its fault proxy), not KUBECONFIG's cluster")


@pytest.fixture
def live_cluster(transactional_db, kube) -> Cluster:
    """The registered cluster row, with a database visible to other threads (transactional)."""
    return kube.register()


class RunningWatch:
    """A ClusterWatch in background threads, stoppable and restartable like a watcher process."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.watch: ClusterWatch | None = None
        self.stop_event = threading.Event()

    def start(self) -> RunningWatch:
        self.stop_event = threading.Event()
        fast = WatchSettings(timeout_range=(2, 3), backoff=lambda: Backoff(initial=0.05, maximum=0.5))
        self.watch = ClusterWatch(Cluster.objects.get(pk=self.cluster.pk), self.stop_event, fast)
        self.watch.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        if self.watch:
            assert self.watch.join(timeout=10), "watch threads did not stop"

    def ready(self) -> bool:
        """Every kind has listed once and is watching."""
        return bool(self.watch) and all(w.resource_version for w in self.watch.watchers)


@pytest.fixture
def watcher(live_cluster) -> Iterator[RunningWatch]:
    running = RunningWatch(live_cluster).start()
    wait_for(running.ready, message="watchers to list and start watching")
    yield running
    running.stop()


@pytest.fixture
def sample() -> Callable[..., dict[str, Any]]:
    return lambda file_name="inferencemodel-mistral-7b.yaml", namespace="default": copy.deepcopy(
        sample_manifest(file_name, namespace)
    )
