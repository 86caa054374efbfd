"""KubeAI's autoscaler, for the Models whose controller the portal is (``models_app.kubeai_controller``).

As KubeAI documents it: every ``KUBEAI_AUTOSCALING_INTERVAL`` seconds the active requests of each
Model are read and kept in a moving average over ``KUBEAI_AUTOSCALING_WINDOW`` seconds; the Model
wants ``ceil(average / targetRequests)`` replicas (so that each replica averages at most
``targetRequests``), within ``minReplicas`` and ``maxReplicas``. Up at once; down only once the
lower count has been wanted for ``scaleDownDelaySeconds`` without a break. Nothing for a Model
with ``autoscalingDisabled``. The decision is written where KubeAI's autoscaler writes it,
``spec.replicas`` of the Model, and the Model is reconciled at once, so its Deployment follows in
the same interval: admission then allows what the team's quota and borrowing permit
(``status.desiredReplicas``, published on ``/metrics``). From zero: a request the gateway holds
scales the Model to one replica (``models_app.wake``), and the readings take it from there.

Active requests are what the Model's engines report (``vllm:num_requests_running`` plus
``vllm:num_requests_waiting``, parsed as the gateway's picker parses them,
``inference_gateway.picking.engine_state``), read from the ready replicas of the Model's Service
(``inference_gateway.endpoints.discover``: the same addresses, checked by the same rule, the
gateway sends requests to, and rediscovered as often: every ``GATEWAY_ENDPOINTS_TTL_SECONDS``,
so an interval costs no list of the cluster's Services and EndpointSlices). A replica that does
not answer in time counts nothing this interval.
In the same pass every answering vLLM replica gets the Model's ``spec.adapters`` through vLLM's
LoRA API (``/v1/load_lora_adapter``, and ``/v1/unload_lora_adapter`` for one no longer listed),
as KubeAI loads adapters into its pods.

Runs in one process per installation: ``manage.py autoscale`` (its windows are in memory, as
KubeAI's are; a restart starts them again empty).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.db import connection

from clusters.kube.client import ClusterGateway, GatewayError
from clusters.models import Cluster, SyncState
from clusters.sync.controllers import reconcile_row
from inference_gateway.addresses import is_loopback_name
from inference_gateway.endpoints import discover
from inference_gateway.picking.engine_state import EngineState, NotEngineMetrics, parse
from inference_gateway.picking.scraper import READ_TIMEOUT_SECONDS, metrics_url
from inference_gateway.routes import route_for
from models_app.models import KubeAIModel
from models_app.public import KUBEAI_KIND as KIND
from models_app.public import wanted_replicas

logger = logging.getLogger(__name__)
DEFAULT_TARGET_REQUESTS = 100  # KubeAI's defaults for a Model that sets neither
DEFAULT_SCALE_DOWN_DELAY = 30
READERS = 8


@dataclass(frozen=True)
class Decision:
    """One Model's interval: the average active requests, the replicas wanted and whether it was written."""

    average: float
    desired: int
    scaled: bool


def desired_replicas(average: float, spec: dict[str, Any]) -> int:
    """KubeAI's rule: ``ceil(average active requests / targetRequests)`` within min and max."""
    # less a hair: an average such as 6.000000001 (float sums) is 6 requests, not 7
    wanted = math.ceil(average / (spec.get("targetRequests") or DEFAULT_TARGET_REQUESTS) - 1e-9)
    wanted = max(wanted, spec.get("minReplicas") or 0)
    high = spec.get("maxReplicas")
    return min(wanted, high) if high is not None else wanted


def _connectable(url: str) -> str:
    """``url`` as ``requests`` can connect to it: a name under ``localhost`` (the live demo's engines,
    ``engine-0.localhost``) is loopback by RFC 6761, as the gateway's resolver reads it
    (``inference_gateway.resolver``), which glibc without systemd-resolved does not resolve (the
    demo's autoscaler read no engine and scaled a loaded Model to zero)."""
    parts = urlsplit(url)
    if parts.hostname and is_loopback_name(parts.hostname):
        return parts._replace(netloc=f"127.0.0.1:{parts.port}" if parts.port else "127.0.0.1").geturl()
    return url


def _read(url: str) -> EngineState | None:
    try:
        answer = requests.get(metrics_url(_connectable(url)), timeout=READ_TIMEOUT_SECONDS, allow_redirects=False)
        return parse(answer.text, time.monotonic()) if answer.status_code == 200 else None
    except (requests.RequestException, NotEngineMetrics) as error:
        logger.debug("engine metrics of %s: %s", url, error)
        return None


def _sync_adapters(url: str, adapters: list[dict[str, str]]) -> None:
    """Make the replica's registered adapters the Model's ``spec.adapters`` (vLLM's runtime LoRA API)."""
    url = _connectable(url)
    try:
        listed = requests.get(f"{url}/v1/models", timeout=READ_TIMEOUT_SECONDS).json()["data"]
        loaded = {item["id"] for item in listed if item.get("parent")}
        wanted = {adapter["name"]: adapter["url"] for adapter in adapters}
        for name in sorted(set(wanted) - loaded):
            requests.post(f"{url}/v1/load_lora_adapter", json={"lora_name": name, "lora_path": wanted[name]},
                          timeout=READ_TIMEOUT_SECONDS).raise_for_status()  # fmt: skip
        for name in sorted(loaded - set(wanted)):
            requests.post(f"{url}/v1/unload_lora_adapter", json={"lora_name": name},
                          timeout=READ_TIMEOUT_SECONDS).raise_for_status()  # fmt: skip
    except (requests.RequestException, ValueError, KeyError, TypeError) as error:
        logger.info("adapters of replica %s not synced: %s", url, error)


class Autoscaler:
    """The moving windows of every Model and when each began to want fewer replicas."""

    def __init__(self, interval: float | None = None, window: float | None = None) -> None:
        self.interval = interval or settings.KUBEAI_AUTOSCALING_INTERVAL
        self.window = window or settings.KUBEAI_AUTOSCALING_WINDOW
        self.samples: dict[tuple[int, str, str], deque[float]] = {}
        self.lower_since: dict[tuple[int, str, str], float] = {}
        self.replicas: dict[tuple[int, str, str], tuple[float, list[str]]] = {}  # key -> (found at, URLs)
        self.pool = ThreadPoolExecutor(READERS, thread_name_prefix="autoscaler-read")

    def close(self) -> None:
        self.pool.shutdown()

    def step(self, cluster: Cluster, now: float | None = None) -> dict[str, Decision]:
        """One interval for every Model of the cluster; ``now`` (monotonic seconds) lets a caller
        step through time. Returns each Model's decision by name."""
        now = time.monotonic() if now is None else now
        rows = list(KubeAIModel.objects.filter(cluster=cluster).select_related("cluster")
                    .exclude(sync_state__in=(SyncState.DELETING, SyncState.DELETED_IN_CLUSTER)))  # fmt: skip
        present = {(row.cluster_id, row.namespace, row.name) for row in rows}
        for table in (self.samples, self.lower_since, self.replicas):  # Models that left leave no state
            for key in [key for key in table if key[0] == cluster.pk and key not in present]:
                del table[key]
        decisions = {}
        gateway = ClusterGateway(cluster)
        try:
            for row in rows:
                try:
                    decisions[row.name] = self._scale(gateway, row, now)
                except GatewayError as error:
                    logger.warning("autoscaling %s/%s: %s", row.namespace, row.name, error)
        finally:
            gateway.close()
        return decisions

    def _scale(self, gateway: ClusterGateway, row: KubeAIModel, now: float) -> Decision:
        spec = gateway.get(KIND, row.namespace, row.name)["spec"]
        key = (row.cluster_id, row.namespace, row.name)
        urls = self._replicas(key, row)
        states = [state for state in self.pool.map(_read, urls) if state is not None]
        if spec.get("adapters") and spec.get("engine") == "VLLM":
            list(self.pool.map(lambda url: _sync_adapters(url, spec["adapters"]), urls))
        current = wanted_replicas(spec)
        if spec.get("autoscalingDisabled"):
            self.samples.pop(key, None)
            return Decision(0.0, current, False)
        window = self.samples.setdefault(key, deque(maxlen=max(1, round(self.window / self.interval))))
        window.append(sum(state.running + state.waiting for state in states))
        average = sum(window) / len(window)
        desired = desired_replicas(average, spec)
        if desired < current:
            since = self.lower_since.setdefault(key, now)
            if now - since < spec.get("scaleDownDelaySeconds", DEFAULT_SCALE_DOWN_DELAY):
                return Decision(average, current, False)
        self.lower_since.pop(key, None)
        if desired == current:
            return Decision(average, desired, False)
        gateway.patch(KIND, row.namespace, row.name, {"spec": {"replicas": desired}})
        reconcile_row(row, gateway=gateway)
        return Decision(average, desired, True)

    def _replicas(self, key: tuple[int, str, str], row: KubeAIModel) -> list[str]:
        """The Model's replica URLs, rediscovered once they are older than the gateway's own lists
        may be (``GATEWAY_ENDPOINTS_TTL_SECONDS``)."""
        found_at, urls = self.replicas.get(key, (-math.inf, []))
        if time.monotonic() - found_at > settings.GATEWAY_ENDPOINTS_TTL_SECONDS:
            urls = discover(route_for(row))
            self.replicas[key] = (time.monotonic(), urls)
        return urls


def managing_clusters() -> Iterator[Cluster]:
    for cluster in Cluster.objects.all():
        if cluster.manages(KIND.kind):
            yield cluster


def run(stop: threading.Event, autoscaler: Autoscaler | None = None) -> None:
    """Every interval, one step per cluster that lets the portal manage Models, until ``stop``."""
    autoscaler = autoscaler or Autoscaler()
    try:
        while not stop.is_set():
            started = time.monotonic()
            for cluster in managing_clusters():
                autoscaler.step(cluster, started)
            stop.wait(max(0.0, autoscaler.interval - (time.monotonic() - started)))
    finally:
        autoscaler.close()
        connection.close()
