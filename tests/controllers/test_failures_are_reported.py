"""Every controller failure is visible where people look, on the real control plane: the object's
``Ready`` condition in the cluster (reason, message, observedGeneration), a Warning Event on it
counted as client-go's recorder counts repeats, and the API's ``lastError`` and events. One test
per failure class: the cluster refuses a write (422), admission refuses (GPUs), a dependency is
missing, a run's config is missing, a Job fails."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta

import kubernetes
import pytest
from django.utils import timezone

from clusters.sync.resync import resync_cluster
from models_app.models import InferenceModel
from runs_app.models import InferenceRun
from scheduler.refresh import refresh_node_pools
from tests.clusters.conftest import sample_manifest, wait_for
from tests.controllers.test_inference_run_controller import write_config, write_run
from tests.support.clusters import reconcile_row

MODEL = "llama-2-7b"


def write_model(kube, **spec_changes) -> dict:
    manifest = sample_manifest("inferencemodel-llama-2-7b.yaml")
    manifest["spec"].update(spec_changes)
    return kube.write(manifest)


def ready_condition(kube, kind, name: str) -> dict:
    status = kube.read(kind, name).get("status") or {}
    return next(c for c in status.get("conditions") or [] if c["type"] == "Ready")


def warnings(kube, name: str, kind=InferenceModel.kube) -> list:
    """The Events ``kubectl describe`` shows for the object (by its uid), Warning only."""
    uid = kube.read(kind, name)["metadata"]["uid"]
    events = kubernetes.client.CoreV1Api(kube.api_client).list_namespaced_event(
        kube.namespace, field_selector=f"involvedObject.uid={uid}").items
    return [event for event in events if event.type == "Warning"]


def api_view(editor, model, name: str) -> dict:
    row = model.objects.get(name=name)
    return editor.get(f"/api/{'inferencemodels' if model is InferenceModel else 'inferenceruns'}/{row.pk}/").json()


@pytest.fixture
def pools(managed):
    """The session's node pools as the portal reads them from the Nodes (gpu-a100: 8 GPUs)."""
    _, cluster = managed
    refresh_node_pools(cluster)
    return managed


def test_a_deployment_the_cluster_refuses_is_on_the_model_its_events_and_the_api(pools, editor, settings) -> None:
    """A GPU asked for without a limit: the API server refuses the Deployment (422). The model says
    so (not a stale message), an Event counts the refused passes (at most one repeat per
    ``EVENT_REPEAT_SECONDS``, 0 here), the API shows it and wake is 422."""
    kube, _ = pools
    write_model(kube, containerImage="")
    kube.sync()
    stale = ready_condition(kube, InferenceModel.kube, MODEL)
    assert stale["reason"] == "Failed" and "containerImage is required" in stale["message"]

    created = write_model(kube, resources={"requests": {"cpu": "4", "memory": "16Gi", "gpu": "1"}})
    kube.sync()
    refused = ready_condition(kube, InferenceModel.kube, MODEL)
    assert refused["status"] == "False" and refused["reason"] == "Invalid"
    assert "Limit must be set for non overcommitable resources" in refused["message"]
    assert "containerImage" not in refused["message"]
    assert refused["observedGeneration"] == created["metadata"]["generation"]
    assert refused["lastTransitionTime"] == stale["lastTransitionTime"]  # still False: no transition
    assert sorted(e.reason for e in warnings(kube, MODEL)) == ["Failed", "Invalid"]  # each failure its own Event
    (event,) = [e for e in warnings(kube, MODEL) if e.reason == "Invalid"]
    assert (event.count, event.source.component) == (1, "inference-portal")
    assert "Limit must be set" in event.message

    settings.EVENT_REPEAT_SECONDS = 0
    kube.sync()  # refused again: the same Event, counted
    (event,) = [e for e in warnings(kube, MODEL) if e.reason == "Invalid"]
    assert event.count == 2

    shown = api_view(editor, InferenceModel, MODEL)
    assert shown["sync"]["state"] == "Synced"  # the mirror matches; health is apart from it
    assert shown["lastError"]["reason"] == "Invalid" and "Limit must be set" in shown["lastError"]["message"]
    assert {c["type"]: c["reason"] for c in shown["status"]["conditions"]}["Ready"] == "Invalid"
    row = InferenceModel.objects.get(name=MODEL)
    events = editor.get(f"/api/inferencemodels/{row.pk}/events/").json()
    assert any(e["reason"] == "Invalid" and e["count"] == 2 for e in events["events"]), events
    woken = editor.post(f"/api/inferencemodels/{row.pk}/wake/")
    assert woken.status_code == 422 and "Limit must be set" in woken.json()["detail"]

    write_model(kube)  # limits again: the cause is gone, so is the message
    kube.sync()
    assert ready_condition(kube, InferenceModel.kube, MODEL)["reason"] in ("Deploying", "Deployed")
    assert api_view(editor, InferenceModel, MODEL)["lastError"] is None


def test_a_node_selector_value_too_long_for_a_pod_template_is_named(pools, editor) -> None:
    """63 characters is the limit of a label value: the CRD takes 70, the Deployment's pod template does not."""
    kube, _ = pools
    write_model(kube, nodeSelector={"inference-pool": "gpu-a100", "zone": "z" * 70})
    kube.sync()
    refused = ready_condition(kube, InferenceModel.kube, MODEL)
    assert refused["reason"] == "Invalid" and "nodeSelector" in refused["message"]
    assert [e.reason for e in warnings(kube, MODEL)] == ["Invalid"]
    row = InferenceModel.objects.get(name=MODEL)
    assert editor.post(f"/api/inferencemodels/{row.pk}/wake/").status_code == 422


def test_gpus_short_is_insufficient_gpu_not_memory(pools, editor) -> None:
    kube, _ = pools
    write_model(kube, resources={"requests": {"gpu": "9"}, "limits": {"gpu": "9"}})
    kube.sync()
    refused = ready_condition(kube, InferenceModel.kube, MODEL)
    assert refused["reason"] == "InsufficientGPU" and "insufficient GPUs" in refused["message"]
    assert [e.reason for e in warnings(kube, MODEL)] == ["InsufficientGPU"]
    assert api_view(editor, InferenceModel, MODEL)["lastError"]["reason"] == "InsufficientGPU"
    row = InferenceModel.objects.get(name=MODEL)
    woken = editor.post(f"/api/inferencemodels/{row.pk}/wake/")  # admission refuses the start: no 200
    assert woken.status_code == 409, woken.json()
    assert woken.json()["detail"].startswith(f"{MODEL} was not started: InsufficientGPU: insufficient GPUs")


def test_a_running_model_edited_to_more_gpus_than_its_pool_has_is_refused_not_rolled_out(pools, editor) -> None:
    """Its new pods are a start: admission refuses it as it refuses a model at zero (it rolled out a pod no
    node could take, and the pool counted the new GPUs as held for every replica, refusing the others)."""
    kube, _ = pools
    write_model(kube)
    kube.sync()
    apps = kubernetes.client.AppsV1Api(kube.api_client)
    assert apps.read_namespaced_deployment(MODEL, kube.namespace).spec.replicas == 1  # running, one GPU a pod
    write_model(kube, resources={"requests": {"gpu": "9"}, "limits": {"gpu": "9"}})
    kube.sync()
    refused = ready_condition(kube, InferenceModel.kube, MODEL)
    assert refused["reason"] == "InsufficientGPU" and "requested 9" in refused["message"], refused
    assert apps.read_namespaced_deployment(MODEL, kube.namespace).spec.replicas == 0
    row = InferenceModel.objects.get(name=MODEL)
    assert row.gpu_count == 0  # the pool holds none for it
    woken = editor.post(f"/api/inferencemodels/{row.pk}/wake/")
    assert woken.status_code == 409 and "InsufficientGPU" in woken.json()["detail"], woken.json()


def test_a_missing_dependency_is_named(pools, editor) -> None:
    kube, _ = pools
    write_model(kube, dependencies=["ghost-model"])
    kube.sync()
    missing = ready_condition(kube, InferenceModel.kube, MODEL)
    assert missing["reason"] == "DependencyNotFound" and "ghost-model" in missing["message"]
    assert [e.reason for e in warnings(kube, MODEL)] == ["DependencyNotFound"]
    assert api_view(editor, InferenceModel, MODEL)["lastError"]["reason"] == "DependencyNotFound"


def test_a_failure_that_waits_unchanged_costs_no_write_until_its_event_may_repeat(pools, settings) -> None:
    """A missing dependency seen again on every pass is one Event, counted once: the passes send the
    cluster nothing. Once ``EVENT_REPEAT_SECONDS`` have passed (0 here), the next pass counts it."""
    kube, _ = pools
    write_model(kube, dependencies=["ghost-model"])
    kube.sync()
    assert [(e.reason, e.count) for e in warnings(kube, MODEL)] == [("DependencyNotFound", 1)]

    assert kube.writes_during(lambda: (kube.sync(), kube.sync())) == []
    assert [(e.reason, e.count) for e in warnings(kube, MODEL)] == [("DependencyNotFound", 1)]

    settings.EVENT_REPEAT_SECONDS = 0
    kube.sync()
    assert [(e.reason, e.count) for e in warnings(kube, MODEL)] == [("DependencyNotFound", 2)]


def test_a_run_without_its_config_then_a_failed_job(managed, editor) -> None:
    kube, _ = managed
    run = write_run(kube)
    name = run["metadata"]["name"]
    kube.sync()
    waiting = ready_condition(kube, InferenceRun.kube, name)
    assert waiting["reason"] == "ConfigNotFound" and "not found" in waiting["message"]
    assert [e.reason for e in warnings(kube, name, InferenceRun.kube)] == ["ConfigNotFound"]
    assert api_view(editor, InferenceRun, name)["lastError"]["reason"] == "ConfigNotFound"

    write_config(kube, image="ghcr.io/krateoplatformops/kserve-krateo-runner:fail")
    wait_for(lambda: kube.sync() and (kube.read(InferenceRun.kube, name)["status"].get("phase")
                                      == "Failed"), timeout=60, message="the run to fail")
    failed = ready_condition(kube, InferenceRun.kube, name)
    assert failed["reason"] == "Failed"
    assert {e.reason for e in warnings(kube, name, InferenceRun.kube)} == {"ConfigNotFound", "Failed"}
    shown = api_view(editor, InferenceRun, name)
    assert shown["lastError"]["reason"] == "Failed" and shown["lastError"]["message"] == failed["message"]


def test_a_refused_write_backs_off_until_the_model_changes_and_keeps_its_failure_through_cooldown(pools,
                                                                                                 editor) -> None:
    """Issue 44, item 4: the cluster refuses the model's Deployment (a GPU without a limit, 422).
    Passes after the first send no Deployment PATCH, and no other write (the apiserver's requests
    through the test's proxy): the same refusal is reported from the backoff. A new generation
    (still refused) is sent once at once. After the cooldown the model still says Invalid, and
    the API still has its lastError, instead of ScaledToZero."""
    kube, _ = pools
    if kube.proxy is None:
        pytest.skip("the requests are counted by the session's fault proxy")
    gpu_without_limit = {"requests": {"cpu": "4", "memory": "16Gi", "gpu": "1"}}
    write_model(kube, resources=gpu_without_limit, cooldownPeriod="1m")
    kube.sync()
    assert ready_condition(kube, InferenceModel.kube, MODEL)["reason"] == "Invalid"

    steady = kube.writes_during(kube.sync) + kube.writes_during(kube.sync)
    assert steady == [], steady  # no PATCH of the Deployment, no status write, no Event

    write_model(kube, resources={**gpu_without_limit, "requests": {**gpu_without_limit["requests"], "cpu": "3"}},
                cooldownPeriod="1m")  # a new generation, refused as well
    changed = kube.writes_during(kube.sync)
    assert [(w.verb, w.plural) for w in changed if w.plural == "deployments"] == [("patch", "deployments")], changed
    assert kube.writes_during(kube.sync) == []

    row = InferenceModel.objects.get(name=MODEL)
    reconcile_row(row, now=timezone.now() + timedelta(hours=1))  # long past its 1m cooldown
    kept = ready_condition(kube, InferenceModel.kube, MODEL)
    assert kept["reason"] == "Invalid" and "Limit must be set" in kept["message"]
    assert api_view(editor, InferenceModel, MODEL)["lastError"]["reason"] == "Invalid"


def test_last_error_since_is_the_first_failure_of_the_run_not_the_creation(pools, editor) -> None:
    """Issue 43, item 4: a model waits for a dependency that never gets ready (Pending: Ready False,
    no failure) from its creation; minutes later its spec names a dependency that does not exist
    (DependencyNotFound), then another. ``lastError.since`` is that first failure, not the creation:
    the ``Failing`` condition's transition time, which a new message within the run keeps."""
    kube, cluster = pools
    helper = sample_manifest("inferencemodel-tokenizer-service.yaml")
    helper["spec"]["nodeSelector"] = {"inference-pool": "gpu-a100", "accelerator": "nvidia-h100"}  # never ready
    kube.write(helper)
    write_model(kube, dependencies=["tokenizer-service"])
    kube.sync()
    row = InferenceModel.objects.get(name=MODEL)
    assert ready_condition(kube, InferenceModel.kube, MODEL)["reason"] == "Pending"
    assert api_view(editor, InferenceModel, MODEL)["lastError"] is None

    failed_at = timezone.now() + timedelta(minutes=3)  # within the model's cooldown
    for minutes, missing in ((0, "ghost-model"), (2, "ghost-two")):  # the run goes on with another message
        write_model(kube, dependencies=[missing])
        resync_cluster(cluster)  # the edit mirrored, no reconcile: the next one is at failed_at
        reconcile_row(InferenceModel.objects.get(pk=row.pk), now=failed_at + timedelta(minutes=minutes))
        shown = api_view(editor, InferenceModel, MODEL)["lastError"]
        assert shown["reason"] == "DependencyNotFound" and missing in shown["message"]
        assert shown["since"] == failed_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert ready_condition(kube, InferenceModel.kube, MODEL)["lastTransitionTime"] < shown["since"]


def test_a_refused_run_write_backs_off_until_the_run_changes(managed) -> None:
    """Issue 44, item 4, for runs (the same backoff as a model's Deployment,
    ``clusters.kube.failures.ensure_backing_off``): a ResourceQuota allowing no Job in the namespace,
    so the API server refuses the run's Job (403). The run says so; the passes after send the
    cluster no write at all (no Job PATCH, no status write, no Event): the refusal is reported from
    the backoff. A new generation of the run (still refused) is sent once, at once."""
    kube, _ = managed
    if kube.proxy is None:
        pytest.skip("the requests are counted by the session's fault proxy")
    with no_jobs_in(kube):
        write_config(kube)
        refused_run_backs_off(kube)


@contextlib.contextmanager
def no_jobs_in(kube) -> Iterator[None]:
    """A ValidatingAdmissionPolicy that refuses every Job of the test's namespace (403 Forbidden), in
    force once a server-side dry run of a Job is refused; removed after."""
    policies = kubernetes.client.AdmissionregistrationV1Api(kube.api_client)
    name = f"no-jobs-{kube.namespace}"
    policies.create_validating_admission_policy({
        "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["v1"],
                                                         "operations": ["CREATE", "UPDATE"], "resources": ["jobs"]}]},
                 "validations": [{"expression": "false", "reason": "Forbidden",
                                  "message": f"no Jobs in {kube.namespace} (test policy)"}]}})
    policies.create_validating_admission_policy_binding({
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {
                     "kubernetes.io/metadata.name": kube.namespace}}}}})
    probe = {"metadata": {"name": "probe"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    batch = kubernetes.client.BatchV1Api(kube.api_client)

    def refused() -> bool:
        try:
            batch.create_namespaced_job(kube.namespace, probe, dry_run="All")
        except kubernetes.client.ApiException as error:
            return error.status == 403
        return False

    try:
        wait_for(refused, timeout=30, message="the policy in force")
        yield
    finally:
        policies.delete_validating_admission_policy_binding(name)
        policies.delete_validating_admission_policy(name)


def refused_run_backs_off(kube) -> None:
    name = write_run(kube)["metadata"]["name"]
    kube.sync()
    refused = ready_condition(kube, InferenceRun.kube, name)
    assert (refused["status"], refused["reason"]) == ("False", "Forbidden"), refused
    assert "test policy" in refused["message"]
    assert [(e.reason, e.count) for e in warnings(kube, name, InferenceRun.kube)] == [("Forbidden", 1)]

    steady = kube.writes_during(kube.sync) + kube.writes_during(kube.sync)
    assert steady == [], steady
    assert ready_condition(kube, InferenceRun.kube, name)["reason"] == "Forbidden"

    write_run(kube, timeoutSeconds=600)  # a new generation, refused as well
    changed = kube.writes_during(kube.sync)
    assert [(w.verb, w.plural) for w in changed if w.plural == "jobs"] == [("patch", "jobs")], changed
    assert kube.writes_during(kube.sync) == []
