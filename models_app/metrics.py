"""Per-model gauges the InferenceModel controller exports; the finalizer removes a model's series."""

from __future__ import annotations

from prometheus_client import Gauge

MODEL_REPLICAS = Gauge(
    "inference_portal_model_replicas", "Running replicas of a managed InferenceModel.", ["cluster", "namespace", "name"]
)
MODEL_MEMORY = Gauge(
    "inference_portal_model_memory_bytes",
    "Declared memory of a managed InferenceModel.",
    ["cluster", "namespace", "name"],
)


def observe(cluster: str, namespace: str, name: str, replicas: int, memory_bytes: int | None) -> None:
    MODEL_REPLICAS.labels(cluster, namespace, name).set(replicas)
    MODEL_MEMORY.labels(cluster, namespace, name).set(memory_bytes or 0)


def forget(cluster: str, namespace: str, name: str) -> None:
    """The reference's "clean up metrics" step: the model's series disappear from /metrics."""
    for gauge in (MODEL_REPLICAS, MODEL_MEMORY):
        try:
            gauge.remove(cluster, namespace, name)
        except KeyError:
            continue
