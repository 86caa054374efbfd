"""The verbs of issue 15 in a real browser: delete (Deleting until the finalizers go, on the real
control plane), configs, submit with many parameters and a schedule, cancel and rerun, the admin's
quantities, widgets and cluster actions, and the small things (history, 400 page, Wake, tokens,
dashboard links, durations chart). Each flow saves screenshots under test-artifacts/."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from accounts.models import NamespaceGrant
from clusters.models import AuditEntry, SyncState
from clusters.sync.audit import Actor, record
from models_app.models import InferenceModel
from runs_app.models import InferenceConfig, InferenceRun
from scheduler.models import NodePool
from tests.accounts.conftest import sample_in, store
from tests.browser.test_portal_in_browser import log_in
from tests.clusters.conftest import sample_manifest, wait_for
from tests.portal.test_verbs_in_cluster import finish_cleanup

pytestmark = pytest.mark.django_db(transaction=True)
GI = 1024**3


def grant_cluster(world, kube, **extra):
    """The real control plane as a second cluster, its test namespace granted to vision."""
    cluster = kube.register(**extra)
    NamespaceGrant.objects.create(team=world.vision, cluster=cluster, namespace=kube.namespace)
    return cluster


def test_delete_asks_then_shows_deleting_until_the_finalizers_go(page, shoot, world, kube) -> None:
    grant_cluster(world, kube)
    manifest = sample_manifest("inferencemodel-mistral-7b.yaml", kube.namespace)
    manifest["metadata"]["finalizers"] = ["inference.eh-ops.io/finalizer"]
    kube.write(manifest)
    kube.sync()
    model = InferenceModel.objects.get(name="mistral-7b")
    log_in(page, "vera")
    page.goto(f"/models/inferencemodels/{model.pk}/")
    page.click("#delete-link")
    expect(page.locator("h1")).to_have_text(f"Delete InferenceModel {kube.namespace}/mistral-7b?")
    expect(page.locator("#delete-consequences")).to_contain_text("until the cluster's finalizers have let it go")
    shoot(page, "delete-confirm")
    page.click("#delete-form button[type=submit]")
    expect(page.locator("h1")).to_have_text("Models")
    expect(page.locator("p.message")).to_contain_text("is being deleted in cluster test")
    row = page.locator("#catalog tr", has_text="mistral-7b")
    expect(row.locator(".badge.Deleting")).to_have_text("Deleting")
    shoot(page, "delete-deleting")

    finish_cleanup(kube, "mistral-7b")
    page.reload()
    expect(row.locator(".badge.DeletedInCluster")).to_have_text("DeletedInCluster")
    shoot(page, "delete-deleted-in-cluster")


def test_config_then_a_scheduled_run_with_many_parameters_then_rerun(page, shoot, world) -> None:
    log_in(page, "vera")
    page.click('header a:text-is("Configs")')
    expect(page.locator("#configs")).to_contain_text("vision/example-inference-config")
    shoot(page, "configs")
    page.click("#new-config")
    page.select_option("#id_cluster", "east")
    page.fill("#id_namespace", "vision")
    page.fill("#id_name", "iris-nightly")
    page.fill("#id_model_name", "sklearn-iris")
    page.fill("#id_model_url", "sklearn-iris-predictor.kserve-test.svc/v2/models/sklearn-iris/infer")
    page.fill("#id_image", "ghcr.io/krateoplatformops/kserve-krateo-runner:0.1.0")
    page.select_option("#id_auto_delete_policy", "DeleteOnSuccess")
    page.fill("#id_more_spec", "storage:\n  input: {s3: {bucket: in}}\n  output: {s3: {bucket: out}}\n")
    page.click("#object-form button[type=submit]")
    expect(page.locator("h1")).to_contain_text("InferenceConfig vision/iris-nightly")
    shoot(page, "config-page")

    page.click("#run-with-config")
    page.fill("#id_name", "nightly")
    page.fill("#id_schedule", "61 3 * * *")
    for index in range(5):  # more rows than the form starts with
        if index >= 3:
            page.click("#add-parameter")
        page.fill(f"#id_param_key_{index}", f"table_{index}")
        page.fill(f"#id_param_value_{index}", f"value {index}")
    page.click("#run-form button[type=submit]")
    expect(page.locator("#error-schedule")).to_contain_text('spec.schedule: "61 3 * * *" is not a cron schedule')
    expect(page.locator("#id_param_key_4")).to_have_value("table_4")  # kept while the error is fixed
    shoot(page, "run-submit-schedule-error")
    page.fill("#id_schedule", "0 3 * * *")
    page.click("#run-form button[type=submit]")
    expect(page.locator("h1")).to_contain_text("Run vision/nightly")
    run = InferenceRun.objects.get(name="nightly")
    assert run.spec["parameters"] == {f"table_{i}": f"value {i}" for i in range(5)} and run.schedule == "0 3 * * *"
    shoot(page, "run-scheduled")

    page.click("#rerun-link")
    expect(page.locator("#rerun-of")).to_contain_text("vision/nightly")
    expect(page.locator("#id_schedule")).to_have_value("0 3 * * *")
    expect(page.locator("#id_param_value_4")).to_have_value("value 4")
    shoot(page, "run-rerun-form")
    page.fill("#id_name", "nightly-again")
    page.fill("#id_param_value_0", "other")
    page.click("#run-form button[type=submit]")
    expect(page.locator("h1")).to_contain_text("Run vision/nightly-again")
    assert InferenceRun.objects.get(name="nightly-again").spec["parameters"]["table_0"] == "other"


def test_cancel_a_running_run_on_the_real_control_plane(page, shoot, world, kube) -> None:
    grant_cluster(world, kube, managed_kinds=["InferenceRun"])
    config = sample_manifest("inferenceconfig-example-inference-config.yaml", kube.namespace)
    config["spec"]["image"] = "ghcr.io/krateoplatformops/kserve-krateo-runner:slow"
    kube.write(config)
    kube.sync()
    log_in(page, "vera")
    page.goto(f"/runs/new/?config={InferenceConfig.objects.get(cluster__name='test').pk}")
    page.fill("#id_name", "to-cancel")
    page.click("#run-form button[type=submit]")
    expect(page.locator("h1")).to_contain_text("Run")
    kube.sync()  # the controller starts the Job
    run = InferenceRun.objects.get(name="to-cancel")
    job = run.status["jobRef"]["name"]
    page.reload()
    page.once("dialog", lambda dialog: dialog.accept())
    shoot(page, "run-before-cancel")
    page.click("#cancel-form button[type=submit]")
    expect(page.locator("p.message")).to_contain_text("Run to-cancel cancelled")
    expect(page.locator("#run-phase")).to_have_text("Failed")
    expect(page.locator("#run-status")).to_contain_text("cancelled by vera")
    expect(page.locator("#cancel-unavailable")).to_contain_text("the run has already ended (Failed)")
    wait_for(lambda: kube.get("batch/v1", "Job", job) is None, timeout=20, message="the Job to go")
    shoot(page, "run-cancelled")


def test_admin_quantities_widgets_and_cluster_actions(page, shoot, world) -> None:
    pool = NodePool.objects.create(cluster=world.cluster, name="gpu", allocatable_bytes=96 * GI, budget_bytes=80 * GI)
    User.objects.filter(username="stan").update(is_superuser=True)
    log_in(page, "stan")
    page.goto("/admin/scheduler/nodepool/")
    expect(page.locator("#result_list")).to_contain_text("96Gi")
    page.goto(f"/admin/scheduler/nodepool/{pool.pk}/change/")
    expect(page.locator("#id_budget_bytes")).to_have_value("80Gi")
    page.fill("#id_budget_bytes", "12 bananas")
    page.click("input[name=_continue]")
    expect(page.locator(".errorlist")).to_contain_text("'12 bananas' is not a Kubernetes quantity")
    page.fill("#id_budget_bytes", "128Gi")
    page.click("input[name=_continue]")
    expect(page.locator("#id_budget_bytes")).to_have_value("128Gi")
    shoot(page, "admin-pool-quantities")
    pool.refresh_from_db()
    assert pool.budget_bytes == 128 * GI

    page.goto(f"/admin/clusters/cluster/{world.cluster.pk}/change/")
    page.fill("#id_namespaces", "vision\nnlp")
    page.check("input[name=managed_kinds][value=InferenceModel]")
    shoot(page, "admin-cluster-widgets")
    page.click("input[name=_save]")
    world.cluster.refresh_from_db()
    assert world.cluster.namespaces == ["vision", "nlp"] and world.cluster.managed_kinds == ["InferenceModel"]
    page.check(f"input[name=_selected_action][value='{world.cluster.pk}']")
    page.select_option("select[name=action]", "test_connection")
    page.click("button[name=index]")
    expect(page.locator(".messagelist")).to_contain_text("East: cannot connect: it is a snapshot")
    shoot(page, "admin-test-connection")


def test_small_things(page, shoot, world) -> None:
    model = world.objects[("InferenceModel", "vision")]
    record(model, AuditEntry.Action.UPDATED, Actor("vera", AuditEntry.Source.PORTAL),
           [{"path": "spec.memory", "old": "80Gi", "new": "96Gi"},
            {"path": "spec.nodeSelector", "old": None, "new": {"inference-pool": "gpu"}}])  # fmt: skip
    InferenceModel.objects.filter(pk=model.pk).update(spec={**model.spec, "dependencies": ["tokenizer-gone"]})
    world.cluster.managed_kinds = ["InferenceModel"]
    world.cluster.save()
    for name, phase, start, end in (("jan", "Succeeded", "2026-01-01T10:00:00Z", "2026-01-01T10:20:00Z"),
                                    ("feb", "Failed", "2026-02-01T10:00:00Z", "2026-02-01T10:05:00Z")):  # fmt: skip
        store(world.cluster, sample_in("InferenceRun", "vision", name=name),
              status={"phase": phase, "startTime": start, "completionTime": end})  # fmt: skip
    log_in(page, "vera")

    page.click('#objects a:text-is("InferenceModel")')  # the dashboard's counts are links
    expect(page).to_have_url(re.compile(r"/models/\?kind=InferenceModel$"))
    page.goto("/")
    page.click(f'#objects a[href="/runs/?sync_state={SyncState.SYNCED}"]')
    expect(page.locator("#runs tbody tr")).to_have_count(3)
    expect(page.locator("#durations svg")).to_be_visible()
    shoot(page, "runs-durations")

    page.goto(f"/models/inferencemodels/{model.pk}/")
    expect(page.locator("#audit")).to_contain_text("inference-pool: gpu")
    expect(page.locator("#start-run")).to_be_visible()  # no run uses it: a way to start one
    page.click("text=Wake")
    expect(page.locator("#wake-result")).to_have_text(re.compile(r"^Wake failed: .*tokenizer-gone"))
    expect(page.locator("#wake-result")).not_to_contain_text("{")
    shoot(page, "model-history-wake")

    page.goto("/models/?ordering=password")
    expect(page.locator("#bad-request")).to_contain_text("ordering: 'password' must be one of name, kind")
    shoot(page, "bad-ordering")

    page.goto("/account/")
    page.fill("input[name=name]", "laptop")
    page.click("text=Create token")
    expect(page).to_have_url(re.compile(r"/account/$"))
    expect(page.locator("#token-key")).to_have_text(re.compile(r"^[0-9a-f]{64}$"))
    page.reload()
    expect(page.locator("#token-key")).to_have_count(0)
    expect(page.locator("#tokens tbody tr")).to_have_count(1)
    shoot(page, "tokens-after-reload")
