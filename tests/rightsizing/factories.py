"""Rows the right-sizing tests need: a cluster pointing at the test Prometheus and its models."""

from __future__ import annotations

from clusters.models import Cluster
from models_app.models import InferenceModel


def make_cluster(prometheus_url: str, name: str = "metrics", **extra) -> Cluster:
    return Cluster.objects.create(
        name=name, auth_method=Cluster.AuthMethod.SNAPSHOT, prometheus_url=prometheus_url, **extra
    )


def make_model(
    cluster: Cluster, name: str, memory: str, namespace: str = "default", model_name: str | None = None, pool: str = ""
) -> InferenceModel:
    spec = {"modelName": model_name or name, "memory": memory, "backendUrl": "http://vllm:8000"}
    if pool:
        spec["nodeSelector"] = {"inference-pool": pool}
    row = InferenceModel(cluster=cluster, namespace=namespace, name=name, spec=spec)
    row.clean()  # CRD defaults applied, as every write path does
    row.save()
    return row


def reference_models(cluster: Cluster) -> dict[str, InferenceModel]:
    """Every model of the test history (see conftest.py), with its declared memory."""
    rows = [
        make_model(cluster, "llama-2-70b", "80Gi", pool="gpu-a100"),
        make_model(cluster, "llama-2-70b", "48Gi", namespace="team-b", pool="gpu-a100"),
        make_model(cluster, "few-samples", "8Gi"),
        make_model(cluster, "no-data", "8Gi"),
        make_model(cluster, "over-peak", "16Gi", pool="gpu-l4"),
        make_model(cluster, "tiny", "512Mi"),
        make_model(cluster, "rounding", "40Gi", pool="gpu-l4"),
        make_model(cluster, "llmd-served", "16Gi"),
    ]
    return {f"{row.namespace}/{row.name}": row for row in rows}
