"""The portal's verbs over HTTP: delete (confirmation, permission, team scope) for every kind,
InferenceConfig pages, run rerun / parameters / schedule, readable history, strict ordering, and
the small things of issue 15 (links, engine choices, durations chart)."""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from clusters.models import AuditEntry
from clusters.sync.audit import Actor, record
from models_app.models import InferenceModel, KubeAIModel
from runs_app.models import InferenceConfig, InferenceRun
from tests.accounts.conftest import sample_in, store
from tests.support.html_forms import form_fields

pytestmark = pytest.mark.django_db
KINDS = ("InferenceModel", "Model", "ModelService", "InferenceConfig", "InferenceRun")


def text(response) -> str:
    assert response.status_code == 200, (response.status_code, response.content[:800])
    return html.unescape(response.content.decode())


def delete_url(obj) -> str:
    return reverse(f"{obj._meta.model_name}-delete-page", args=[obj.pk])


def detail_url(obj) -> str:
    return reverse(f"{obj._meta.model_name}-detail-page", args=[obj.pk])


@pytest.mark.parametrize("kind", KINDS)
def test_delete_asks_first_then_deletes_and_is_recorded(world, kind) -> None:
    obj = world.objects[(kind, "vision")]
    browser = world.browser("member")
    assert f'href="{delete_url(obj)}"' in text(browser.get(detail_url(obj)))  # the object page offers it
    confirm = text(browser.get(delete_url(obj)))
    assert f"Delete {obj.kube.kind} vision/{obj.name}?" in confirm
    assert "does not have this object: deleting removes it from the portal now" in confirm  # a snapshot row
    assert type(obj).objects.filter(pk=obj.pk).exists()  # asking is not deleting
    done = browser.post(delete_url(obj), follow=True)
    assert f"{obj.kube.kind} vision/{obj.name} deleted." in text(done)
    assert not type(obj).objects.filter(pk=obj.pk).exists()
    entry = AuditEntry.objects.get(kind=obj.kube.kind, object_id=obj.pk)
    assert (entry.action, entry.actor_label, entry.source) == ("deleted", "vera", "portal")


@pytest.mark.parametrize("kind", KINDS)
def test_delete_is_refused_outside_the_team_or_without_the_permission(world, make_user, kind) -> None:
    obj = world.objects[(kind, "vision")]
    for who in ("other", "viewer"):  # nlp's member; vision's view-only team
        assert world.browser(who).get(delete_url(obj)).status_code == 404
        assert world.browser(who).post(delete_url(obj)).status_code == 404
    app, model = obj._meta.app_label, obj._meta.model_name
    no_delete = make_user("nodel", perms=[f"{app}.view_{model}", f"{app}.change_{model}"], teams=[world.vision])
    browser = world.browser(None)
    browser.force_login(no_delete)
    assert f'href="{delete_url(obj)}"' not in text(browser.get(detail_url(obj)))
    refused = browser.post(delete_url(obj))
    assert refused.status_code == 403
    assert world.browser(None).post(delete_url(obj)).status_code == 302  # to the login page
    assert type(obj).objects.filter(pk=obj.pk).exists()


def test_config_pages_list_detail_create_and_edit(world) -> None:
    browser = world.browser("member")
    listed = text(browser.get("/configs/"))
    assert "vision/example-inference-config" in listed and "nlp/" not in listed
    assert 'href="/configs/"' in text(browser.get("/"))  # in the navigation
    config = world.objects[("InferenceConfig", "vision")]
    page = text(browser.get(detail_url(config)))
    assert "sklearn-iris" in page and "vision/iris-run-january" in page  # the runs that use it
    assert f'href="/runs/new/?config={config.pk}"' in page

    form = text(browser.get("/configs/new/?model_name=llama-2-70b"))
    assert 'value="llama-2-70b"' in form and "Storage and more (YAML)" in form
    fields = {
        "cluster": "east", "namespace": "vision", "name": "llama-batch", "model_name": "llama-2-70b",
        "model_url": "llama.kserve.svc/v2/models/llama/infer", "image": "runner:1", "auto_delete_policy": "Wrong",
        "more_spec": "storage:\n  input: {s3: {bucket: in}}\n  output: {s3: {bucket: out}}\n",
    }  # fmt: skip
    refused = browser.post("/configs/new/", fields)
    assert refused.status_code == 200 and 'id="error-auto_delete_policy"' in refused.content.decode()
    created = browser.post("/configs/new/", {**fields, "auto_delete_policy": "DeleteOnSuccess"})
    assert created.status_code == 302, created.content.decode()[:2000]
    row = InferenceConfig.objects.get(name="llama-batch")
    assert row.spec["storage"]["output"] == {"s3": {"bucket": "out"}} and row.auto_delete_policy == "DeleteOnSuccess"
    assert created["Location"] == detail_url(row)

    edit_url = f"/configs/{row.pk}/edit/"
    edit = browser.get(edit_url).content.decode()
    posted = {**form_fields(edit), "image": "runner:2"}
    assert browser.post(edit_url, posted).status_code == 302
    row.refresh_from_db()
    assert row.image == "runner:2" and row.spec["storage"]["input"] == {"s3": {"bucket": "in"}}
    assert f'href="/configs/{row.pk}/edit/"' in text(browser.get(f"/configs/{row.pk}/yaml/"))  # modes link
    assert world.browser("other").get(edit_url).status_code == 404


def test_rerun_fills_the_form_with_the_runs_values(world) -> None:
    run = world.objects[("InferenceRun", "vision")]
    browser = world.browser("member")
    assert f'href="/runs/{run.pk}/rerun/"' in text(browser.get(f"/runs/{run.pk}/"))
    page = text(browser.get(f"/runs/{run.pk}/rerun/"))
    fields = form_fields(page)
    config = world.objects[("InferenceConfig", "vision")]
    assert fields["config"] == str(config.pk) and fields["timeout_seconds"] == "3600"
    given = {fields[f"param_key_{i}"]: fields[f"param_value_{i}"] for i in range(3) if fields.get(f"param_key_{i}")}
    assert given == run.spec["parameters"]
    assert fields["name"] == ""  # a new name is made
    assert 'action="/runs/new/"' in page and "Filled in from run" in page
    fields["param_value_0"] = "changed"
    submitted = browser.post("/runs/new/", fields)
    assert submitted.status_code == 302, submitted.content.decode()[:2000]
    again = InferenceRun.objects.exclude(pk=run.pk).get(namespace="vision")
    assert again.spec["parameters"] == {**run.spec["parameters"], "input_table_name": "changed"}
    assert world.browser("other").get(f"/runs/{run.pk}/rerun/").status_code == 404


def test_submission_takes_any_number_of_parameters_and_a_cron_schedule(world) -> None:
    browser = world.browser("member")
    config = world.objects[("InferenceConfig", "vision")]
    fields = {"config": config.pk, "name": "many", "timeout_seconds": 60, "schedule": "0 3 * * *"}
    fields |= {f"param_key_{i}": f"p{i}" for i in range(12)} | {f"param_value_{i}": f"v{i}" for i in range(12)}
    assert browser.post("/runs/new/", fields).status_code == 302
    run = InferenceRun.objects.get(name="many")
    assert run.spec["parameters"] == {f"p{i}": f"v{i}" for i in range(12)} and run.schedule == "0 3 * * *"

    bad = browser.post("/runs/new/", {**fields, "name": "bad-cron", "schedule": "61 * * * *"})
    page = html.unescape(bad.content.decode())
    assert bad.status_code == 200 and 'id="error-schedule"' in page
    assert 'spec.schedule: "61 * * * *" is not a cron schedule' in page
    assert not InferenceRun.objects.filter(name="bad-cron").exists()
    twice = browser.post("/runs/new/", {**fields, "name": "twice", "param_key_11": "p0"})
    assert "parameters.p0: is given twice" in html.unescape(twice.content.decode())
    form_page = text(browser.get("/runs/new/"))
    assert 'id="add-parameter"' in form_page and 'name="param_key_2"' in form_page


def test_cancel_is_explained_where_the_portal_cannot_cancel(world) -> None:
    run = world.objects[("InferenceRun", "vision")]
    page = text(world.browser("member").get(f"/runs/{run.pk}/"))
    assert 'id="cancel-unavailable"' in page and "the cluster does not have the run yet" in page
    refused = world.browser("member").post(f"/runs/{run.pk}/cancel/", follow=True)
    assert "Cannot cancel iris-run-january: the cluster does not have the run yet" in text(refused)
    assert world.browser("other").post(f"/runs/{run.pk}/cancel/").status_code == 404
    assert world.browser("viewer").post(f"/runs/{run.pk}/cancel/").status_code == 404


def test_cancel_is_refused_with_the_way_out_where_another_controller_runs_the_run(world) -> None:
    run = world.objects[("InferenceRun", "vision")]
    InferenceRun.objects.filter(pk=run.pk).update(uid="uid-1", phase="Running")  # the cluster has it, running
    page = text(world.browser("member").get(f"/runs/{run.pk}/"))
    assert "runs InferenceRuns with another controller, which has no way to stop a run: delete the run" in page
    world.cluster.managed_kinds = ["InferenceRun"]
    world.cluster.save()
    InferenceRun.objects.filter(pk=run.pk).update(schedule="0 3 * * *")
    page = text(world.browser("member").get(f"/runs/{run.pk}/"))
    assert "a scheduled run starts a Job on each tick: delete the run to stop its schedule" in page


def test_history_shows_field_paths_with_yaml_values(world) -> None:
    model = world.objects[("InferenceModel", "vision")]
    changes = [
        {"path": "spec.memory", "old": "80Gi", "new": "96Gi"},
        {"path": "spec.container", "old": None, "new": {"resources": {"limits": {"cpu": "4"}}}},
        {"path": "spec.dependencies", "old": ["tokenizer"], "new": []},
        {"path": "spec.maxReplicas", "old": 2, "new": None},
        {"path": "spec.command", "old": "echo one", "new": "echo one\necho two"},
    ]
    record(model, AuditEntry.Action.UPDATED, Actor("vera", AuditEntry.Source.PORTAL), changes)
    page = text(world.browser("member").get(detail_url(model)))
    audit = page[page.index('<section id="audit">'):]
    assert "<code>spec.memory</code>" in audit and "<pre>80Gi</pre>" in audit and "<pre>96Gi</pre>" in audit
    assert "<pre>resources:\n  limits:\n    cpu: '4'</pre>" in audit
    assert "<pre>- tokenizer</pre>" in audit and "<pre>[]</pre>" in audit and "<pre>2</pre>" in audit
    assert "<em>not set</em>" in audit and "<pre>|-\n  echo one\n  echo two</pre>" in audit
    assert "{'" not in audit and "['" not in audit and "None" not in audit  # no Python reprs


def test_bad_ordering_is_400_in_the_api_and_a_styled_page_in_the_portal(world) -> None:
    api = world.api("member")
    refused = api.get("/api/inferencemodels/", {"ordering": "password"})
    assert refused.status_code == 400
    message = refused.json()["ordering"][0]
    assert message.startswith("ordering: 'password' must be one of ") and "memory_bytes" in message
    assert api.get("/api/inferencemodels/", {"ordering": "-memory_bytes,name"}).status_code == 200
    assert api.get("/api/inferenceruns/", {"ordering": "name,nope"}).status_code == 400
    page = world.browser("member").get("/models/", {"ordering": "password"})
    body = html.unescape(page.content.decode())
    assert page.status_code == 400 and "<!doctype html>" in body and "ordering: 'password' must be one of" in body
    runs = world.browser("member").get("/runs/", {"sync_state": "Bogus"})
    assert runs.status_code == 400 and 'id="bad-request"' in runs.content.decode()


def test_engine_choices_fold_case_and_keep_stored_values(world) -> None:
    for index, engine in enumerate(("VLLM", "vLLM", "vLLM")):
        manifest = sample_in("Model", "vision", name=f"m{index}")
        manifest["spec"].update(engine="VLLM", url="hf://org/model")
        row = store(world.cluster, manifest)
        KubeAIModel.objects.filter(pk=row.pk).update(engine=engine)  # as another controller spelled it
    page = text(world.browser("member").get("/models/"))
    select = re.search(r'<select name="engine">(.*?)</select>', page, re.S)[1]
    assert re.findall(r"<option[^>]*>([^<]*)</option>", select) == ["all", "OLlama", "vLLM"]
    assert set(KubeAIModel.objects.filter(name__startswith="m").values_list("engine", flat=True)) == {"VLLM", "vLLM"}
    assert "3 models" in text(world.browser("member").get("/models/", {"engine": "vLLM", "kind": "Model"}))


def test_dashboard_clusters_and_counts_are_links(world) -> None:
    page = text(world.browser("member").get("/"))
    assert '<a href="/models/?cluster=east"' in page and 'href="/runs/?cluster=east"' in page
    assert '<a href="/models/?kind=InferenceModel&sync_state=Synced"><span class="badge Synced">1</span></a>' in page
    assert '<a href="/runs/?sync_state=Synced"><span class="badge Synced">1</span></a>' in page
    assert '<a href="/configs/">InferenceConfig</a>' in page
    listed = text(world.browser("member").get("/models/?kind=InferenceModel&sync_state=Synced"))
    assert "1 model." in listed


def test_a_model_without_runs_links_to_starting_one(world) -> None:
    model = world.objects[("InferenceModel", "vision")]
    page = text(world.browser("member").get(detail_url(model)))
    assert "No run uses this model" in page
    assert f'href="/configs/new/?model_name={model.model_name}" id="start-run"' in page
    InferenceModel.objects.filter(pk=model.pk).update(model_name="sklearn-iris")  # the config's model
    config = world.objects[("InferenceConfig", "vision")]
    page = text(world.browser("member").get(detail_url(model)))
    assert f'href="/runs/new/?config={config.pk}" id="start-run"' in page


def test_run_durations_are_plotted_on_the_list_and_the_run_page(world) -> None:
    config = world.objects[("InferenceConfig", "vision")]
    times = (("fast", "Succeeded", "2026-01-01T10:00:00Z", "2026-01-01T10:02:00Z"),
             ("slow", "Failed", "2026-01-01T11:00:00Z", "2026-01-01T11:30:00Z"),
             ("never", "Pending", None, None))  # fmt: skip
    for name, phase, start, end in times:
        manifest = sample_in("InferenceRun", "vision", name=name)
        status = {"phase": phase, **({"startTime": start, "completionTime": end} if start else {})}
        store(world.cluster, manifest, status=status)
    listed = text(world.browser("member").get("/runs/"))
    chart = listed[listed.index('<figure class="chart" id="durations">'):]
    assert "Durations of the runs listed (minutes)" in chart and "fast" in chart and "slow" in chart
    assert ">never<" not in chart  # never started: no duration
    run = InferenceRun.objects.get(name="slow")
    page = text(world.browser("member").get(f"/runs/{run.pk}/"))
    assert f"Runs of {config.name} (minutes)" in page and '<section id="durations">' in page
