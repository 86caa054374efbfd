"""Mirrored rows read from the database (clusters.models.KubeObject.from_db) are the instances
Django's ``Model.from_db`` builds: the same attributes, values and state, related objects joined or
not, and Django's own path where a model's rows could differ (signal receivers, deferred columns)."""

from __future__ import annotations

import datetime

import pytest
from django.db import connection
from django.db.models.signals import post_init
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster, KubeObject, SyncState, _plain_columns
from models_app.models import InferenceModel, KubeAIModel, ModelService
from runs_app.models import InferenceConfig, InferenceRun

pytestmark = pytest.mark.django_db
KINDS = (InferenceModel, KubeAIModel, ModelService, InferenceConfig, InferenceRun)


def _state(instance: KubeObject) -> tuple:
    return instance._state.adding, instance._state.db


def _attributes(instance: KubeObject) -> dict:
    return {key: value for key, value in instance.__dict__.items() if key != "_state"}


def _rows(cluster: Cluster, kind: type[KubeObject]) -> None:
    kind.objects.bulk_create([
        kind(cluster=cluster, namespace="team-a", name="full", uid="u-1", generation=2, labels={"a": "ü"},
             spec={"n": [1, 2.5, None], "big": 2**70}, status={"ready": True}, sync_state=SyncState.CONFLICT,
             conflict={"fields": []}, cluster_created_at=datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)),
        kind(cluster=cluster, namespace="team-b", name="empty"),
    ])  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_rows_read_are_the_instances_djangos_from_db_builds(cluster: Cluster, kind: type[KubeObject]) -> None:
    _rows(cluster, kind)
    assert _plain_columns(kind) is not None and not post_init.has_listeners(kind)  # the first read takes it
    fast = list(kind.objects.order_by("name"))
    receiver_seen: list[KubeObject] = []

    def receiver(sender, instance, **kwargs) -> None:
        receiver_seen.append(instance)

    post_init.connect(receiver, sender=kind)  # a receiver: Django's own path, which sends it
    try:
        django = list(kind.objects.order_by("name"))
    finally:
        post_init.disconnect(receiver, sender=kind)
    assert receiver_seen == django and len(django) == 2
    assert [_attributes(row) for row in fast] == [_attributes(row) for row in django]
    assert [list(row.__dict__) for row in fast] == [list(row.__dict__) for row in django]
    assert [_state(row) for row in fast] == [_state(row) for row in django] == [(False, "default")] * 2
    assert [row.get_deferred_fields() for row in fast] == [set(), set()]


def test_joined_and_deferred_reads_still_work(cluster: Cluster) -> None:
    _rows(cluster, InferenceModel)
    with CaptureQueriesContext(connection) as queries:
        joined = InferenceModel.objects.select_related("cluster").get(name="full")
        assert joined.cluster.name == cluster.name
    assert len(queries.captured_queries) == 1
    unjoined = InferenceModel.objects.get(name="full")
    with CaptureQueriesContext(connection) as queries:
        assert unjoined.cluster == cluster
    assert len(queries.captured_queries) == 1
    deferred = InferenceModel.objects.defer("spec").get(name="full")
    assert deferred.get_deferred_fields() == {"spec"} and deferred.spec["big"] == 2**70
    unjoined.name = "renamed"
    unjoined.save()
    assert InferenceModel.objects.filter(name="renamed").exists()
