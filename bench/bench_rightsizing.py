"""Right-sizing report time for 1,000 models from a real Prometheus, batched vs one query per model.

History: 1,000 models (one pod each, 20 namespaces), ``container_memory_working_set_bytes`` every
minute for 7 days (10,080 samples per model, about 10 million in all) plus ``kube_pod_labels``
every 10 minutes, backfilled with promtool into one block and served by ``prometheus`` on loopback.
``BENCH_RIGHTSIZING_STEP`` (seconds, default 60) and ``BENCH_RIGHTSIZING_MODELS`` shrink it.

Figures: ``rightsizing.report_s_1000`` (a full refresh: the batched queries, the policies, history
rows and status for every model), ``rightsizing.prom_queries_1000`` (HTTP requests to Prometheus in
that refresh; also as ``queries_1000``), ``rightsizing.sql_queries_1000`` (SQL statements in that
refresh: a constant, see refresh.py), ``rightsizing.per_model_report_s_1000`` (the same refresh
asking once per model, the reference) and ``rightsizing.per_model_queries_1000``; plus the setup
cost (``backfill_s``).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster
from models_app.models import InferenceModel
from scheduler.rightsizing.models import Observation, Refresh
from scheduler.rightsizing.refresh import refresh_cluster
from tests.rightsizing.prometheus_server import GI, MI, PrometheusServer  # `python -m bench` runs from the root

MODELS = int(os.environ.get("BENCH_RIGHTSIZING_MODELS", "1000"))
STEP = int(os.environ.get("BENCH_RIGHTSIZING_STEP", "60"))
DAYS = 7


class _StreamedHistory:
    """Writes the OpenMetrics file straight to disk: ten million lines do not fit in a list."""

    def __init__(self, end: int) -> None:
        self.end = end

    def write(self, path: Path) -> None:
        stamps = range(self.end - DAYS * 86400 + STEP, self.end + 1, STEP)
        label_stamps = range(self.end - DAYS * 86400 + 600, self.end + 1, 600)
        with path.open("w", buffering=1 << 20) as handle:
            handle.write("# TYPE container_memory_working_set_bytes gauge\n")
            for index in range(MODELS):
                prefix = (
                    f'container_memory_working_set_bytes{{container="server",namespace="team-{index % 20}",'
                    f'pod="model-{index:04d}-0"}} '
                )
                base, peak_at = (8 + index % 64) * GI, (index * 7919) % len(stamps)
                handle.writelines(
                    f"{prefix}{base + (512 * MI if i == peak_at else (i % 50) * MI)} {t}\n"
                    for i, t in enumerate(stamps)
                )
            handle.write("# TYPE kube_pod_labels gauge\n")
            for index in range(MODELS):
                prefix = (
                    f'kube_pod_labels{{label_inference_eh_ops_io_model="model-{index:04d}",'
                    f'namespace="team-{index % 20}",pod="model-{index:04d}-0"}} '
                )
                handle.writelines(f"{prefix}1 {t}\n" for t in label_stamps)
            handle.write("# EOF\n")


def run() -> dict[str, float]:
    end = (int(time.time()) // 60) * 60 - 120
    started = time.perf_counter()
    server = PrometheusServer(_StreamedHistory(end), ready_timeout=300)  # type: ignore[arg-type]
    setup = time.perf_counter() - started
    samples = MODELS * (DAYS * 86400 // STEP)
    print(
        f"rightsizing: {MODELS} models x {DAYS} d every {STEP} s = {samples:,} samples; "
        f"backfill {server.backfill_seconds:.1f} s, ready after {setup:.1f} s"
    )
    try:
        cluster = Cluster.objects.create(
            name="bench-rs", auth_method=Cluster.AuthMethod.SNAPSHOT, prometheus_url=server.url
        )
        rows = []
        for index in range(MODELS):
            spec = {
                "modelName": f"model-{index:04d}",
                "memory": f"{16 + index % 64}Gi",
                "backendUrl": "http://vllm:8000",
                "nodeSelector": {"inference-pool": f"pool-{index % 10}"},
            }
            row = InferenceModel(cluster=cluster, namespace=f"team-{index % 20}", name=f"model-{index:04d}", spec=spec)
            row.project()
            rows.append(row)
        InferenceModel.objects.bulk_create(rows, batch_size=500)
        at = datetime.fromtimestamp(end, tz=UTC)
        refresh_cluster(cluster, at=at)  # warm Prometheus' page cache and the database
        started = time.perf_counter()
        with CaptureQueriesContext(connection) as statements:
            batched = refresh_cluster(cluster, at=at)
        batched_s = time.perf_counter() - started
        assert batched.ok and batched.models_with_data == MODELS, batched.error
        started = time.perf_counter()
        per_model = refresh_cluster(cluster, at=at, batched=False)
        per_model_s = time.perf_counter() - started
        assert per_model.ok and per_model.models_with_data == MODELS, per_model.error
        Observation.objects.filter(cluster=cluster).delete()
        Refresh.objects.filter(cluster=cluster).delete()
        InferenceModel.objects.filter(cluster=cluster).delete()
        cluster.delete()
    finally:
        server.stop()
    return {
        "rightsizing.report_s_1000": batched_s,
        "rightsizing.queries_1000": float(batched.queries),
        "rightsizing.prom_queries_1000": float(batched.queries),
        "rightsizing.sql_queries_1000": float(len(statements.captured_queries)),
        "rightsizing.per_model_report_s_1000": per_model_s,
        "rightsizing.per_model_queries_1000": float(per_model.queries),
        "rightsizing.backfill_s": server.backfill_seconds,
        "rightsizing.samples_backfilled": float(samples),
    }
