"""Delete and cancel from the portal's pages against the real control plane: a deleted object shows
Deleting until its finalizers are gone; a cancelled run ends Failed and its Job and pods go."""

from __future__ import annotations

import html

import pytest
from django.test import Client

from clusters.models import SyncState
from models_app.models import InferenceModel
from runs_app.models import InferenceRun
from tests.clusters.conftest import sample_manifest, wait_for
from tests.conftest import ALL_KIND_PERMS

FINALIZER = "inference.eh-ops.io/finalizer"


def finish_cleanup(kube, name: str) -> None:
    """The other controller finishes: it removes its finalizer, the object goes, a resync sees it."""
    held = kube.read(InferenceModel.kube, name)
    held["metadata"]["finalizers"] = []
    kube.write(held, field_manager="controller")
    wait_for(lambda: kube.read(InferenceModel.kube, name) is None, message="the object to go")
    kube.sync()


@pytest.fixture
def portal(transactional_db, make_user) -> Client:
    browser = Client()
    browser.force_login(make_user("vera", perms=ALL_KIND_PERMS))
    return browser


def test_delete_shows_deleting_until_the_finalizers_are_gone(kube, portal) -> None:
    kube.register()
    manifest = sample_manifest("inferencemodel-mistral-7b.yaml", kube.namespace)
    manifest["metadata"]["finalizers"] = [FINALIZER]  # another controller's cleanup still to do
    kube.write(manifest)
    kube.sync()
    row = InferenceModel.objects.get(name="mistral-7b")
    url = f"/models/inferencemodels/{row.pk}/delete/"
    confirm = html.unescape(portal.get(url).content.decode())
    assert "Deleting</span> until the cluster's finalizers have let it go" in confirm

    done = portal.post(url, follow=True)
    assert "is being deleted in cluster test" in html.unescape(done.content.decode())
    assert kube.read(InferenceModel.kube, "mistral-7b")["metadata"]["deletionTimestamp"]
    row.refresh_from_db()
    assert row.sync_state == SyncState.DELETING
    listed = portal.get("/models/", {"sync_state": "Deleting"}).content.decode()
    assert "1 model." in listed and "mistral-7b" in listed
    page = portal.get(f"/models/inferencemodels/{row.pk}/").content.decode()
    assert 'id="delete-link"' not in page and ">Deleting</span>" in page
    kube.sync()  # a resync while the finalizer holds it changes nothing
    row.refresh_from_db()
    assert row.sync_state == SyncState.DELETING

    finish_cleanup(kube, "mistral-7b")
    row.refresh_from_db()
    assert row.sync_state == SyncState.DELETED_IN_CLUSTER


def test_cancel_fails_the_run_and_deletes_its_job_for_good(kube, portal) -> None:
    kube.register(managed_kinds=["InferenceRun"])
    config = sample_manifest("inferenceconfig-example-inference-config.yaml", kube.namespace)
    config["spec"]["image"] = "ghcr.io/krateoplatformops/kserve-krateo-runner:slow"  # its pod takes 3 s
    kube.write(config)
    run = sample_manifest("inferencerun-iris-run-january.yaml", kube.namespace)
    run["spec"]["configRef"]["namespace"] = kube.namespace
    kube.write(run)
    kube.sync()
    row = InferenceRun.objects.get(name="iris-run-january")
    job = row.status["jobRef"]["name"]
    assert kube.get("batch/v1", "Job", job) is not None and row.phase in ("Pending", "Running")
    assert 'id="cancel-form"' in portal.get(f"/runs/{row.pk}/").content.decode()

    done = portal.post(f"/runs/{row.pk}/cancel/", follow=True)
    assert "Run iris-run-january cancelled" in html.unescape(done.content.decode())
    wait_for(lambda: kube.get("batch/v1", "Job", job) is None, timeout=20, message="the Job to go")
    assert kube.get("v1", "ConfigMap", f"{job}-contract") is None
    status = kube.read(InferenceRun.kube, "iris-run-january")["status"]
    assert (status["phase"], status["message"]) == ("Failed", "cancelled by vera")
    assert any(c["type"] == "Cancelled" and c["status"] == "True" for c in status["conditions"])
    row.refresh_from_db()
    assert row.phase == "Failed"
    assert "the run has already ended (Failed)" in portal.get(f"/runs/{row.pk}/").content.decode()

    kube.sync()  # the controller leaves a finished run alone: no new Job, no "Job lost"
    assert kube.get("batch/v1", "Job", job) is None
    assert kube.read(InferenceRun.kube, "iris-run-january")["status"]["message"] == "cancelled by vera"
