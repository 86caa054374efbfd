"""In Chromium: a model's and a run's page show their Deployment, ReplicaSet, Job, pods and events
live from the real control plane and a pod's log; the YAML editor loads with nothing from the
network, highlights YAML, completes the CRD's fields, and reviews the changes before saving."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from accounts.models import NamespaceGrant, Team
from devstack.control_plane import POD_LOG_LINES
from models_app.models import InferenceModel
from runs_app.controller import job_name
from runs_app.models import InferenceRun
from tests.browser.test_portal_in_browser import log_in
from tests.clusters.conftest import sample_manifest, wait_for
from tests.conftest import ALL_KIND_PERMS
from tests.controllers.conftest import managed  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db(transaction=True)


def test_model_and_run_pages_show_live_objects_events_and_logs(page, shoot, managed, make_user):  # noqa: F811
    kube, cluster = managed
    team = Team.objects.create(name="ml")
    NamespaceGrant.objects.create(team=team, cluster=cluster, namespace=kube.namespace)
    make_user("mia", perms=ALL_KIND_PERMS, teams=[team])
    kube.write(sample_manifest("inferencemodel-llama-2-7b.yaml", kube.namespace))
    kube.write(sample_manifest("inferenceconfig-example-inference-config.yaml", kube.namespace))
    run = sample_manifest("inferencerun-iris-run-january.yaml", kube.namespace)
    run["spec"]["configRef"]["namespace"] = kube.namespace
    job = job_name("iris-run-january", kube.write(run)["metadata"]["uid"])
    kube.sync()
    wait_for(lambda: kube.list("v1", "Pod", label_selector="app.kubernetes.io/name=llama-2-7b"), timeout=30,
             message="the model's pods")
    wait_for(lambda: kube.list("v1", "Pod", label_selector=f"job-name={job}"), timeout=30, message="the Job's pod")

    log_in(page, "mia")
    page.goto(f"/models/inferencemodels/{InferenceModel.objects.get(name='llama-2-7b').pk}/")
    expect(page.locator("#live-workloads")).to_contain_text("Deployment")
    expect(page.locator("#live-workloads")).to_contain_text("ReplicaSet")
    expect(page.locator("#live-pods")).to_contain_text(re.compile(r"gpu-a100-\d"))
    expect(page.locator("#live-pods")).to_contain_text("Running")
    expect(page.locator("#live-events")).to_contain_text("ScalingReplicaSet")
    page.locator("#live-pods a.pod-log-link").first.click()
    expect(page.locator("#pod-log-text")).to_contain_text(POD_LOG_LINES[-1])
    expect(page.locator("#pod-log")).to_contain_text("Following")
    page.locator("#live-section").scroll_into_view_if_needed()
    shoot(page, "model-live-objects")

    page.goto(f"/runs/{InferenceRun.objects.get(name='iris-run-january').pk}/")
    expect(page.locator("#live-workloads")).to_contain_text(job)
    expect(page.locator("#live-events")).to_contain_text("SuccessfulCreate")
    page.locator("#live-pods a.pod-log-link").first.click()
    for line in POD_LOG_LINES:
        expect(page.locator("#pod-log-text")).to_contain_text(line)
    page.click("text=Stop following")
    expect(page.locator("#pod-log")).not_to_contain_text("Following")
    shoot(page, "run-live-objects-and-log")


def test_yaml_editor_loads_offline_completes_crd_fields_and_reviews_changes(page, shoot, world, live_server):
    outside = []

    def only_the_portal(route):
        if route.request.url.startswith(live_server.url):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_portal)
    model = world.objects[("InferenceModel", "vision")]
    log_in(page, "vera")
    outside.clear()  # the dashboard's charts are not the editor's (pygal links its tooltip script)
    page.goto(f"/models/inferencemodels/{model.pk}/yaml/")
    editor = page.locator(".cm-editor")
    expect(editor).to_be_visible()
    expect(page.locator("#id_manifest")).to_be_hidden()
    expect(page.locator(".cm-content")).to_contain_text("modelName: llama-2-70b")
    # highlighted: keys and values are in token spans of their own
    assert page.locator(".cm-line span[class^='ͼ']").count() > 5

    page.evaluate("""() => {  // the person deletes the line "  cooldownPeriod: 15m" and stays on it
        const view = document.querySelector('#id_manifest').yamlEditor;
        const text = view.state.doc.toString();
        const from = text.indexOf('  cooldownPeriod: 15m');
        view.dispatch({changes: {from, to: from + '  cooldownPeriod: 15m'.length, insert: '  '},
                       selection: {anchor: from + 2}});
        view.focus();
    }""")
    page.keyboard.press("Control+Space")
    options = page.locator(".cm-tooltip-autocomplete .cm-completionLabel")
    expect(options.first).to_be_visible()
    assert options.all_inner_texts() == ["cooldownPeriod"]  # the spec field not set
    page.wait_for_timeout(200)  # CodeMirror ignores keys for 75 ms after the list opens (interactionDelay)
    page.keyboard.press("Enter")
    page.keyboard.type("30m")
    # the form field follows the editor (CodeMirror reads typed keys from the DOM a moment later)
    expect(page.locator("#id_manifest")).to_have_value(re.compile(r"\n  cooldownPeriod: 30m\n"))
    page.evaluate("""() => {  // a new line under metadata: its CRD-less fields are offered too
        const view = document.querySelector('#id_manifest').yamlEditor;
        const at = view.state.doc.toString().indexOf('  namespace: vision') + '  namespace: vision'.length;
        view.dispatch({changes: {from: at, insert: '\\n  '}, selection: {anchor: at + 3}});
    }""")
    page.keyboard.press("Control+Space")
    expect(options.first).to_be_visible()
    assert sorted(options.all_inner_texts()) == ["annotations", "labels"]
    page.keyboard.press("Escape")
    shoot(page, "yaml-editor-completion")

    page.click("#review-button")
    expect(page.locator("#review-changes")).to_contain_text("spec.cooldownPeriod")
    expect(page.locator("#review-changes")).to_contain_text("30m")
    expect(page.locator("#review-local")).to_contain_text("Checked by the portal's own validation only")
    expect(page.locator(".cm-editor")).to_be_visible()
    shoot(page, "yaml-review-changes")
    assert outside == []  # the editor pages asked nothing of the network
    page.click("#save-button")
    expect(page.locator("h1")).to_contain_text("llama-2-70b")
    assert InferenceModel.objects.get(pk=model.pk).spec["cooldownPeriod"] == "30m"
