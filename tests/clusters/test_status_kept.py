"""Issue 43, item 4: every path that stores a status read from the cluster (the watch and a resync,
in bulk or one by one; the controller's status write and a wake, through ``upsert_from_cluster``;
an edit's or apply's answer, through ``outbound``) merges it with the portal's own status keys
(right-sizing's figures, which the portal keeps even where it does not write them to the cluster)
instead of replacing them, so the catalog's utilization and the planning page's observed memory
stay. PostgreSQL, no cluster needed: objects are handed over as a cluster lists or answers them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from clusters.sync.inbound import upsert_from_cluster
from clusters.sync.ingest import ingest_items
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's bulk paths")

FIGURES = {"observedPeakMemory": "12Gi", "utilizationPercent": 75, "recommendation": "Consider reducing memory",
           "lastObservation": "2026-11-28T10:00:00Z"}  # fmt: skip


def as_listed(version: str, status: dict[str, Any]) -> dict[str, Any]:
    item = sample_manifest("inferencemodel-mistral-7b.yaml", "team")
    item["metadata"].update(uid="uid-1", resourceVersion=version)
    item["status"] = copy.deepcopy(status)
    return item


@pytest.fixture
def measured(cluster) -> InferenceModel:
    """A synced model a right-sizing refresh measured (its figures in the portal's copy only, as on a
    cluster where the portal does not control the kind)."""
    ingest_items(InferenceModel, cluster, [as_listed("1", {"replicas": 1})], timezone.now())
    row = InferenceModel.objects.get(cluster=cluster)
    row.status = {**row.status, **FIGURES}
    row.project()
    row.save()
    return row


def figures(row: InferenceModel) -> tuple[dict[str, Any], int | None, int | None]:
    row.refresh_from_db()
    return {key: row.status.get(key) for key in FIGURES}, row.observed_peak_bytes, row.utilization_percent


KEPT = (FIGURES, 12 * 1024**3, 75)


@pytest.mark.parametrize("listed_at", [timezone.now, lambda: None], ids=["resync", "watch"])
def test_a_bulk_sync_of_a_new_status_keeps_the_portals_figures(cluster, measured, listed_at) -> None:
    ingest_items(InferenceModel, cluster, [as_listed("2", {"replicas": 0, "ready": False})], listed_at())
    assert figures(measured) == KEPT
    assert measured.status["replicas"] == 0  # the cluster's own keys are the cluster's


def test_the_controllers_status_write_and_a_wake_keep_the_portals_figures(cluster, measured) -> None:
    upsert_from_cluster(InferenceModel, cluster, as_listed("3", {"replicas": 1, "ready": True}))
    assert figures(measured) == KEPT
    assert measured.status["ready"] is True


def test_the_clusters_own_value_of_a_figure_wins(cluster, measured) -> None:
    upsert_from_cluster(InferenceModel, cluster, as_listed("4", {"utilizationPercent": 40}))
    assert figures(measured)[2] == 40
    ingest_items(InferenceModel, cluster, [as_listed("5", {"utilizationPercent": 30})], None)
    assert figures(measured)[2] == 30 and measured.status["observedPeakMemory"] == "12Gi"
