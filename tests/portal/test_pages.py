"""Portal pages over HTTP: dashboard, catalog, model page, forms with per-field errors, YAML mode, runs."""

from __future__ import annotations

import base64
import html
import re
from collections import Counter

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.access import VIEW, restrict
from clusters.kinds import all_models
from clusters.models import AuditEntry, Cluster, SyncState
from clusters.sync.audit import Actor
from clusters.sync.inbound import upsert_from_cluster
from fleet.dashboard import visible_rows_by_sync_state
from models_app.models import InferenceModel, KubeAIModel
from runs_app.models import InferenceRun
from tests.accounts.conftest import sample_in, store

pytestmark = pytest.mark.django_db


def text(response) -> str:
    assert response.status_code == 200, (response.status_code, response.content[:500])
    return response.content.decode()


def test_dashboard_counts_only_the_teams_objects(world):
    page = text(world.browser("member").get("/"))
    assert "Dashboard" in page and "east" in page
    assert 'id="objects"' in page
    row = page.split(">InferenceModel</a>")[1].split("</tr>")[0]
    assert '<a href="/models/?kind=InferenceModel">1</a>' in row  # vision's only; staff see both
    staff_row = text(world.browser("staff").get("/")).split(">InferenceModel</a>")[1].split("</tr>")[0]
    assert '<a href="/models/?kind=InferenceModel">2</a>' in staff_row
    assert world.browser(None).get("/").status_code == 302


def test_dashboard_counts_every_kind_by_state_in_two_statements_at_most(world):
    """The kept totals (every serving kind at once) where the user sees every row, one ``UNION ALL``
    of ``GROUP BY``s for the rest, each kind's counts those of its visible rows."""
    models = all_models()
    InferenceModel.objects.filter(namespace="vision").update(sync_state=SyncState.ERROR)
    for who in ("member", "other", "viewer", "staff"):
        user = getattr(world, who)
        with CaptureQueriesContext(connection) as queries:
            counted = visible_rows_by_sync_state(user, models)
        counts = [query for query in queries if "sync_state" in query["sql"]]  # not restrict's read of the grants
        assert len(counts) <= 2, who
        expected = [Counter(restrict(model.objects.all(), user, VIEW).values_list("sync_state", flat=True))
                    for model in models]  # fmt: skip
        assert counted == [dict(states) for states in expected], who


def test_catalog_filters_sorts_and_paginates(world):
    browser = world.browser("staff")
    every = text(browser.get("/models/"))
    assert "6 models" in every  # 3 serving kinds x 2 namespaces
    only = text(browser.get("/models/", {"kind": "Model", "namespace": "vision", "sync_state": "", "ready": ""}))
    assert "1 model." in only and "gemma2-2b-cpu" in only and "llama-2-70b" not in only
    featured = text(browser.get("/models/", {"feature": "TextGeneration"}))
    assert "2 models" in featured and "qwen3-8b" not in featured  # only KubeAI models have features
    assert "0 models" in text(browser.get("/models/", {"feature": "SpeechToText"}))
    assert "2 models" in text(browser.get("/models/", {"engine": "OLlama"}))
    found = text(browser.get("/models/", {"sync_state": "Synced", "q": "70b", "namespace": "nlp"}))
    assert "1 model." in found and "llama-2-70b" in found
    by_memory = text(browser.get("/models/", {"ordering": "-memory_bytes"}))
    assert by_memory.index("qwen3-8b") < by_memory.index("llama-2-70b")  # 2 x 48Gi before 80Gi
    ascending = text(browser.get("/models/", {"ordering": "memory_bytes"}))
    assert ascending.index("llama-2-70b") < ascending.index("qwen3-8b")
    bad = browser.get("/models/", {"ordering": "password"})
    assert bad.status_code == 400 and "ordering: 'password' must be one of" in html.unescape(bad.content.decode())
    for index in range(30):
        store(world.cluster, sample_in("InferenceModel", "vision", name=f"bulk-{index:02d}"))
    first = browser.get("/models/", {"kind": "InferenceModel"}).content.decode()
    assert "next →" in first and "bulk-00" in first and "bulk-29" not in first
    following = html.unescape(re.search(r'<a href="\?([^"]*)">next →</a>', first).group(1))
    assert "kind=InferenceModel" in following and "bulk-29" in text(browser.get("/models/?" + following))


def test_catalog_shows_only_the_teams_models(world):
    page = text(world.browser("member").get("/models/"))
    assert "3 models" in page and ">nlp<" not in page


def test_model_page_shows_spec_status_recommendation_runs_and_history(world):
    model = world.objects[("InferenceModel", "vision")]
    model.status = {
        "ready": True, "observedPeakMemory": "75Gi", "utilizationPercent": 93,
        "recommendation": "Consider reducing memory from 80Gi to 78Gi (observed peak 75Gi, 6% overprovisioned)",
        "conditions": [{"type": "Ready", "status": "True", "reason": "Running", "message": "serving",
                        "lastTransitionTime": "2026-11-01T00:00:00Z"}],
    }  # fmt: skip
    model.save()
    config = store(world.cluster, {**sample_in("InferenceConfig", "vision", name="llama-batch")})
    config.spec["modelName"] = model.model_name
    config.save()
    store(world.cluster, {**sample_in("InferenceRun", "vision", name="uses-llama"),
                          "spec": {"configRef": {"name": "llama-batch", "namespace": "vision"}}})  # fmt: skip
    page = text(world.browser("member").get(f"/models/inferencemodels/{model.pk}/"))
    assert "memory: 80Gi" in page and "Consider reducing memory from 80Gi to 78Gi" in page
    assert "Apply recommendation" in page and "<svg" in page and "serving" in page
    assert "vision/uses-llama" in page
    assert "Take portal values" not in page  # no conflict
    assert "Edit as YAML" in page
    as_viewer = text(world.browser("viewer").get(f"/models/inferencemodels/{model.pk}/"))
    assert "Apply recommendation" not in as_viewer and "Edit as YAML" not in as_viewer


def test_conflict_shows_each_field_and_resolves(world):
    model = world.objects[("InferenceModel", "vision")]
    cluster_side = {**model.desired_document(), "spec": {**model.spec, "memory": "90Gi"}}
    InferenceModel.objects.filter(pk=model.pk).update(
        sync_state=SyncState.CONFLICT,
        spec={**model.spec, "memory": "70Gi"},
        conflict={"resourceVersion": "7", "uid": "u", "cluster": cluster_side, "message": "1 field(s) changed",
                  "fields": [{"path": "spec.memory", "base": "80Gi", "portal": "70Gi", "cluster": "90Gi",
                              "base_set": True, "portal_set": True, "cluster_set": True}]},
    )  # fmt: skip
    url = f"/models/inferencemodels/{model.pk}/"
    page = text(world.browser("member").get(url))
    for value in ("spec.memory", "80Gi", "70Gi", "90Gi", "Take cluster values"):
        assert value in page
    assert world.browser("other").post(url + "resolve/", {"take": "cluster"}).status_code == 404
    assert world.browser("viewer").post(url + "resolve/", {"take": "cluster"}).status_code == 404
    done = world.browser("member").post(url + "resolve/", {"take": "cluster"})
    assert done.status_code == 302 and done["Location"] == url
    resolved = InferenceModel.objects.get(pk=model.pk)
    assert resolved.sync_state == SyncState.SYNCED and resolved.spec["memory"] == "90Gi"
    entry = AuditEntry.objects.filter(object_id=model.pk, action=AuditEntry.Action.RESOLVED).get()
    assert entry.source == "portal" and entry.actor_label == "vera"
    again = world.browser("member").post(url + "resolve/", {"take": "cluster"}, follow=True)
    assert "sync_state: &quot;Synced&quot; is not Conflict" in again.content.decode()


def test_create_form_shows_the_error_at_the_field_then_saves(world):
    browser = world.browser("member")
    form = {"cluster": "east", "namespace": "vision", "name": "phi-3", "model_name": "phi-3", "memory": "16GB",
            "backend_url": "http://phi:8000", "labels": "team: vision",
            "more_spec": "nodeSelector: {inference-pool: gpu}"}  # fmt: skip
    page = text(browser.post("/models/inferencemodels/new/", form))
    field = page.split('id="field-memory"')[1].split("</p>")[0]
    assert "spec.memory: &quot;16GB&quot; is not a Kubernetes quantity such as 16Gi" in field and "field-error" in page
    assert not InferenceModel.objects.filter(name="phi-3").exists()
    saved = browser.post("/models/inferencemodels/new/", {**form, "memory": "16Gi"})
    created = InferenceModel.objects.get(name="phi-3")
    assert saved.status_code == 302 and saved["Location"] == f"/models/inferencemodels/{created.pk}/"
    assert created.spec["memory"] == "16Gi" and created.node_pool == "gpu" and created.labels == {"team": "vision"}
    assert AuditEntry.objects.get(object_id=created.pk, kind="InferenceModel").source == "portal"
    refused = text(browser.post("/models/inferencemodels/new/", {**form, "namespace": "nlp", "memory": "1Gi"}))
    assert "&#x27;nlp&#x27; in cluster east is not a namespace your teams may edit" in refused
    bad_yaml = text(browser.post("/models/inferencemodels/new/", {**form, "name": "x2", "more_spec": "a: [b"}))
    assert "more_spec: is not valid YAML at line 1" in bad_yaml.split('id="field-more_spec"')[1].split("</p>")[0]


def test_edit_form_keeps_identity_and_the_rest_of_the_spec(world):
    model = world.objects[("Model", "vision")]
    url = f"/models/kubeai-models/{model.pk}/edit/"
    page = text(world.browser("member").get(url))
    assert 'value="ollama://gemma2:2b"' in page and "loadBalancing" in page
    form = {"url": "hf://google/gemma-2-2b", "engine": "OLlama", "features": "TextGeneration", "labels": "",
            "resource_profile": "cpu:2", "more_spec": "replicas: 1\nautoscalingDisabled: true",
            "edit_version": model.edit_version()}  # fmt: skip
    assert f'name="edit_version" value="{model.edit_version()}"' in page
    wrong = text(world.browser("member").post(url, form))
    assert (
        "spec.url: &quot;hf://google/gemma-2-2b&quot; must use ollama:// exactly when spec.engine is OLlama"
        in (wrong.split('id="field-url"')[1].split("</p>")[0])
    )
    assert world.browser("member").post(url, {**form, "engine": "VLLM", "name": "renamed"}).status_code == 302
    saved = KubeAIModel.objects.get(pk=model.pk)
    assert saved.name == model.name and saved.engine == "VLLM" and saved.spec["autoscalingDisabled"] is True
    assert world.browser("other").get(url).status_code == 404
    assert world.browser("viewer").get(url).status_code == 404


def test_yaml_mode_lists_each_error_with_its_path(world):
    browser = world.browser("member")
    manifest = (
        "apiVersion: inference.eh-ops.io/v1alpha1\nkind: InferenceModel\n"
        "metadata: {name: from-yaml, namespace: vision}\n"
        "spec: {modelName: m, memory: lots, backendUrl: 'http://m:8000', maxReplicas: 5}\n"
    )
    page = text(browser.post("/models/inferencemodels/new/yaml/", {"cluster": "east", "manifest": manifest}))
    errors = page.split('id="form-errors"')[1].split("</ul>")[0]
    assert "spec.memory: &quot;lots&quot;" in errors and "spec.maxReplicas: 5" in errors
    fixed = manifest.replace("lots", "4Gi").replace("maxReplicas: 5", "maxReplicas: 1")
    assert browser.post("/models/inferencemodels/new/yaml/", {"cluster": "east", "manifest": fixed}).status_code == 302
    assert InferenceModel.objects.get(name="from-yaml").spec["memory"] == "4Gi"
    foreign = fixed.replace("namespace: vision", "namespace: nlp").replace("from-yaml", "other")
    assert "is not a namespace your teams may create in" in text(
        browser.post("/models/inferencemodels/new/yaml/", {"cluster": "east", "manifest": foreign})
    )


def test_submit_a_run_and_follow_its_status(world):
    config = world.objects[("InferenceConfig", "vision")]
    browser = world.browser("member")
    page = text(browser.get("/runs/new/"))
    assert f'value="{config.pk}"' in page and f'value="{world.objects[("InferenceConfig", "nlp")].pk}"' not in page
    form = {"config": config.pk, "name": "nightly", "timeout_seconds": 600, "param_key_0": "table",
            "param_value_0": "input_2026", "param_key_1": "", "param_value_1": "orphan"}  # fmt: skip
    assert "parameters: value &#x27;orphan&#x27; needs a name" in text(browser.post("/runs/new/", form))
    form["param_key_1"] = "limit"
    done = browser.post("/runs/new/", form)
    run = InferenceRun.objects.get(name="nightly")
    assert done.status_code == 302 and done["Location"] == f"/runs/{run.pk}/"
    assert run.spec == {"configRef": {"name": config.name, "namespace": "vision"}, "timeoutSeconds": 600,
                        "parameters": {"table": "input_2026", "limit": "orphan"}}  # fmt: skip
    assert "no cluster connected" in text(browser.get(f"/runs/{run.pk}/"))  # a snapshot: nothing would move
    # An API server behind the cluster (this test plays its part below): the page follows the run.
    Cluster.objects.filter(pk=world.cluster.pk).update(
        auth_method=Cluster.AuthMethod.TOKEN, server_url="https://east.example:6443"
    )
    live = text(browser.get(f"/runs/{run.pk}/"))
    assert 'hx-trigger="every 2s"' in live and "The contract has not been produced yet" in live
    manifest = run.to_manifest()
    manifest["metadata"]["uid"] = "u-1"
    contract = base64.b64encode(b'{"jobName": "inf-nightly-u1"}').decode()  # status.contract is format: byte
    # the Job's counts as last copied, from before it ended: the page reads the run's phase
    manifest["status"] = {"phase": "Succeeded", "jobRef": {"name": "inf-nightly-u1", "namespace": "vision"},
                          "jobStatus": {"active": 1, "succeeded": 1}, "contract": contract}  # fmt: skip
    upsert_from_cluster(InferenceRun, world.cluster, manifest, Actor.cluster(manifest))
    status = text(browser.get(f"/runs/{run.pk}/status/"))
    assert "Succeeded" in status and "hx-trigger" not in status and "inf-nightly-u1-contract" in status
    assert "&quot;jobName&quot;: &quot;inf-nightly-u1&quot;" in status and "succeeded 1" in status
    assert "active 1" not in status and "active 1" not in text(browser.get(f"/runs/{run.pk}/"))
    # the poll that finds it ended takes a Cancel shown at load away (out of band)
    assert ('<span id="cancel-form" hx-swap-oob="outerHTML"><small>Cancel: the run has already ended (Succeeded)'
            in status)
    assert "vision/nightly" in text(browser.get("/runs/", {"phase": "Succeeded"}))
    assert "vision/nightly" not in text(browser.get("/runs/", {"phase": "Failed"}))
    assert world.browser("other").get(f"/runs/{run.pk}/status/").status_code == 404
