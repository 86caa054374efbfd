"""The embedded demo says why nothing moves: its cluster is a snapshot with no API server, so a run
waiting there says "no cluster connected" instead of polling for ever, and a model's page says so
where the live objects would be."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.test import Client

from clusters.models import Cluster
from models_app.models import InferenceModel
from runs_app.models import InferenceRun
from tests.conftest import ALL_KIND_PERMS


@pytest.fixture
def viewer(db, make_user) -> Client:
    call_command("load_demo", stdout=io.StringIO())
    client = Client()
    client.force_login(make_user("viewer", perms=ALL_KIND_PERMS))
    return client


def test_a_run_waiting_in_the_snapshot_says_no_cluster_is_connected_and_does_not_poll(viewer) -> None:
    demo = Cluster.objects.get(name="demo")
    run = InferenceRun.objects.filter(cluster=demo).first()
    InferenceRun.objects.create(cluster=demo, namespace=run.namespace, name="waiting-run", spec=run.spec)
    waiting = InferenceRun.objects.get(cluster=demo, name="waiting-run")
    page = viewer.get(f"/runs/{waiting.pk}/").content.decode()
    assert "no cluster connected" in page.lower() and 'id="no-cluster"' in page
    assert 'hx-trigger="every 2s"' not in page and "(updates live)" not in page


def test_a_model_page_of_the_snapshot_says_no_cluster_is_connected(viewer) -> None:
    model = InferenceModel.objects.filter(cluster__name="demo").first()
    page = viewer.get(f"/models/inferencemodels/{model.pk}/").content.decode()
    assert 'id="no-cluster"' in page and 'id="live-none"' in page
    assert "/live/inferencemodel/" not in page
