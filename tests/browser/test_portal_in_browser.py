"""The portal in a real browser: log in, filter, create with a field error then fix it, run and watch."""

from __future__ import annotations

import base64
import re

import pytest
from playwright.sync_api import expect

from clusters.sync.audit import Actor
from clusters.sync.inbound import upsert_from_cluster
from models_app.models import InferenceModel
from runs_app.models import InferenceRun
from scheduler.models import NodePool

pytestmark = pytest.mark.django_db(transaction=True)
GI = 1024**3


def log_in(page, username: str) -> None:
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))  # anonymous users see only the login page
    page.fill("#id_username", username)
    page.fill("#id_password", "pw-for-tests")
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Dashboard")


def test_member_logs_in_filters_creates_and_fixes_a_model(page, shoot, world):
    NodePool.objects.create(cluster=world.cluster, name="gpu", budget_bytes=200 * GI, allocatable_bytes=256 * GI)
    log_in(page, "vera")
    expect(page.locator("#objects")).to_contain_text("InferenceModel")
    shoot(page, "dashboard")

    page.click('header a:text-is("Models")')
    expect(page.locator("#catalog tbody tr")).to_have_count(3)  # vision's three serving models only
    page.select_option("select[name=kind]", "Model")
    page.click("#catalog-filters button[type=submit]")
    expect(page.locator("#catalog tbody tr")).to_have_count(1)
    expect(page.locator("#catalog")).to_contain_text("gemma2-2b-cpu")
    shoot(page, "catalog-filtered")

    page.goto("/models/inferencemodels/new/")
    page.select_option("#id_cluster", "east")
    page.fill("#id_namespace", "vision")
    page.fill("#id_name", "phi-3-mini")
    page.fill("#id_model_name", "phi-3-mini")
    page.fill("#id_memory", "16GB")
    page.fill("#id_backend_url", "http://phi:8000")
    page.fill("#id_more_spec", "nodeSelector:\n  inference-pool: gpu\n")
    page.click("#object-form button[type=submit]")
    error = page.locator("#error-memory")
    expect(error).to_contain_text('spec.memory: "16GB" is not a Kubernetes quantity such as 16Gi')
    expect(page.locator("#field-memory")).to_have_class(re.compile("field-error"))
    shoot(page, "create-model-field-error")

    page.fill("#id_memory", "16Gi")
    page.click("#object-form button[type=submit]")
    expect(page.locator("h1")).to_contain_text("InferenceModel vision/phi-3-mini")
    expect(page.locator("#spec")).to_contain_text("memory: 16Gi")
    expect(page.locator("#audit")).to_contain_text("vera")
    shoot(page, "model-page")
    assert InferenceModel.objects.get(name="phi-3-mini").memory_bytes == 16 * GI


def test_member_submits_a_run_and_watches_it_finish(page, shoot, world):
    log_in(page, "vera")
    page.click('header a:text-is("Runs")')
    page.click("text=Submit a run")
    config = world.objects[("InferenceConfig", "vision")]
    page.select_option("#id_config", str(config.pk))
    page.fill("#id_name", "browser-run")
    page.fill("#id_timeout_seconds", "900")
    page.fill("#id_param_key_0", "input_table_name")
    page.fill("#id_param_value_0", "kserve_input")
    page.click("#run-form button[type=submit]")
    expect(page.locator("#run-phase")).to_have_text("Pending")
    expect(page.locator("#contract-missing")).to_be_visible()
    shoot(page, "run-pending")

    run = InferenceRun.objects.get(name="browser-run")
    contract = base64.b64encode(b'{"jobName": "inf-browser-run"}').decode()  # status.contract is format: byte
    succeeded = {"jobStatus": {"succeeded": 1}, "contract": contract}
    for version, (phase, extra) in enumerate((("Running", {"jobStatus": {"active": 1}}), ("Succeeded", succeeded))):
        manifest = run.to_manifest()
        manifest["metadata"].update(uid="uid-browser-run", resourceVersion=f"cluster-{version}")  # as the cluster says
        manifest["status"] = {"phase": phase, "jobRef": {"name": "inf-browser-run", "namespace": "vision"}, **extra}
        upsert_from_cluster(InferenceRun, world.cluster, manifest, Actor.cluster(manifest))
        page.reload()  # a snapshot cluster is not connected: its run page does not poll (it says so)
        expect(page.locator("#run-phase")).to_have_text(phase)
    expect(page.locator("#contract")).to_contain_text('"jobName": "inf-browser-run"')
    expect(page.locator("#status")).to_contain_text("succeeded: 1")  # the status section follows live too
    expect(page.locator("#run-status")).not_to_have_attribute("hx-trigger", re.compile("."))
    shoot(page, "run-succeeded")


def test_planning_rightsizing_and_account_pages_open(page, shoot, world):
    NodePool.objects.create(cluster=world.cluster, name="gpu-a100", budget_bytes=160 * GI, allocatable_bytes=160 * GI)
    log_in(page, "stan")
    page.click('header a:text-is("Planning")')
    expect(page.locator("h1")).to_have_text("Memory planning")
    expect(page.locator("figure.chart svg")).to_be_visible()
    shoot(page, "planning")
    page.click('header a:text-is("Right-sizing")')
    expect(page.locator("h1")).to_have_text("Right-sizing")
    shoot(page, "rightsizing")
    page.click("header .user a")
    page.fill("input[name=name]", "laptop")
    page.click("text=Create token")
    expect(page.locator("#token-key")).to_have_text(re.compile(r"^[0-9a-f]{64}$"))
    page.goto("/account/")
    expect(page.locator("#tokens")).to_contain_text("laptop")
    expect(page.locator("#token-key")).to_have_count(0)
    shoot(page, "account")
