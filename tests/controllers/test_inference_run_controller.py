"""The portal as InferenceRun controller (reference 003), on the real control plane: the Job
controller runs the Job, kwok runs its pod (an image tagged ``:slow`` takes 3 s, ``:fail`` exits 1),
the garbage collector removes what a run owned."""

from __future__ import annotations

import base64
import json

import pytest

from runs_app.controller import MAX_CRONJOB_NAME, job_name
from runs_app.models import InferenceRun
from tests.clusters.conftest import sample_manifest, wait_for

KIND = InferenceRun.kube
RUN = "iris-run-january"


def write_config(kube, **spec) -> dict:
    config = sample_manifest("inferenceconfig-example-inference-config.yaml", kube.namespace)
    config["spec"].update(spec)
    return kube.write(config)


def write_run(kube, name: str = RUN, **spec) -> dict:
    manifest = sample_manifest("inferencerun-iris-run-january.yaml", kube.namespace)
    manifest["metadata"]["name"] = name
    manifest["spec"]["configRef"]["namespace"] = kube.namespace
    manifest["spec"].update(spec)
    return kube.write(manifest)


@pytest.fixture
def run(managed):
    kube, _ = managed
    write_config(kube)
    return write_run(kube)


def job(kube, name: str) -> dict | None:
    return kube.get("batch/v1", "Job", name)


def run_status(kube, name: str = RUN) -> dict:
    return kube.read(KIND, name).get("status") or {}


def job_condition(kube, name: str) -> str | None:
    """The Job's finished condition (Complete / Failed) as the Job controller wrote it."""
    for condition in ((job(kube, name) or {}).get("status") or {}).get("conditions") or []:
        if condition["type"] in ("Complete", "Failed") and condition["status"] == "True":
            return condition["type"]
    return None


def wait_job_finished(kube, name: str) -> str:
    """The Job's end as the cluster has it, once this process's informers have it too."""
    finished = wait_for(lambda: job_condition(kube, name), timeout=30, message=f"Job {name} to finish")
    kube.informed("batch/v1", "Job", name)
    return finished


def test_contract_configmap_and_job_as_the_reference_describes(managed, run) -> None:
    kube, _ = managed
    kube.sync()
    uid = run["metadata"]["uid"]
    name = f"inf-iris-run-january-{uid.replace('-', '')[:8]}"
    created = job(kube, name)
    owner = {
        "apiVersion": "ai.krateo.io/v1",
        "kind": "InferenceRun",
        "name": RUN,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert created["metadata"]["ownerReferences"] == [owner]
    pod = created["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert created["spec"]["activeDeadlineSeconds"] == 3600
    config = sample_manifest("inferenceconfig-example-inference-config.yaml")
    assert pod["containers"][0]["image"] == config["spec"]["image"]
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "contract", "mountPath": "/etc/inference", "readOnly": True}
    ]
    assert pod["volumes"][0]["configMap"]["name"] == f"{name}-contract"
    configmap = kube.get("v1", "ConfigMap", f"{name}-contract")
    assert configmap["metadata"]["ownerReferences"] == [owner]
    contract = json.loads(configmap["data"]["contract.json"])
    assert contract == {
        "jobId": uid,
        "jobName": name,
        "kserve": {
            "modelName": config["spec"]["modelName"],
            "modelUrl": config["spec"]["modelUrl"],
            "modelVersion": config["spec"]["modelVersion"],
            "modelInputName": config["spec"].get("modelInputName", ""),
        },
        "input": config["spec"]["storage"]["input"],
        "output": config["spec"]["storage"]["output"],
        "parameters": run["spec"]["parameters"],
    }
    status = run_status(kube)
    assert status["jobRef"]["name"] == name
    # The CRD declares status.contract `format: byte`: the API server only takes base64.
    assert json.loads(base64.b64decode(status["contract"])) == contract


def test_job_names_stay_dns_safe_within_the_limits() -> None:
    long_name = "a-very-long-run-name-that-keeps-going.and.going-well-past-the-limit"
    name = job_name(long_name, "0123abcd-ffff")
    assert len(name) <= 63 and name.startswith("inf-a-very-long") and name.endswith("-0123abcd")
    assert all(part.isalnum() for part in name.split("-"))
    assert len(job_name(long_name, "0123abcd-ffff", MAX_CRONJOB_NAME)) <= 52


def test_long_run_names_make_valid_labels_jobs_and_cronjobs(managed) -> None:
    kube, _ = managed
    write_config(kube)
    long_name = "nightly-" + "x" * 80
    write_run(kube, long_name)
    write_run(kube, long_name + "-cron", schedule="0 3 * * *")
    kube.sync()
    for name in (long_name, long_name + "-cron"):
        status = run_status(kube, name)
        assert status.get("jobRef"), status
    runner = job(kube, run_status(kube, long_name)["jobRef"]["name"])
    label = runner["metadata"]["labels"]["ai.krateo.io/inference-run"]
    assert len(label) <= 63 and label.startswith("nightly-xxx")
    cronjob = kube.get("batch/v1", "CronJob", run_status(kube, long_name + "-cron")["jobRef"]["name"])
    assert len(cronjob["metadata"]["name"]) <= 52


def test_status_follows_the_job_through_running_to_succeeded(managed) -> None:
    kube, _ = managed
    write_config(kube, image="ghcr.io/krateoplatformops/kserve-krateo-runner:slow")
    write_run(kube)
    kube.sync()
    name = run_status(kube)["jobRef"]["name"]
    wait_for(lambda: (job(kube, name).get("status") or {}).get("active"), timeout=30, message="the runner pod")
    kube.informed("batch/v1", "Job", name)
    kube.sync()
    status = run_status(kube)
    assert status["phase"] == "Running" and status["startTime"] == job(kube, name)["status"]["startTime"]
    assert wait_job_finished(kube, name) == "Complete"
    kube.sync()
    status = run_status(kube)
    assert (status["phase"], status["completionTime"]) == ("Succeeded", job(kube, name)["status"]["completionTime"])
    assert InferenceRun.objects.get(name=RUN).phase == "Succeeded"


def test_a_succeeded_run_is_not_started_again_when_its_job_is_gone(managed, run) -> None:
    kube, _ = managed
    kube.sync()
    name = run_status(kube)["jobRef"]["name"]
    assert wait_job_finished(kube, name) == "Complete"
    kube.sync()
    assert run_status(kube)["phase"] == "Succeeded"
    kube.delete("batch/v1", "Job", name)
    wait_for(lambda: job(kube, name) is None, message="the Job to go")
    kube.informed("batch/v1", "Job", name)
    kube.sync()
    kube.sync()
    assert job(kube, name) is None
    assert run_status(kube)["phase"] == "Succeeded"


def test_timeout_fails_the_run(managed) -> None:
    kube, _ = managed
    write_config(kube, image="ghcr.io/krateoplatformops/kserve-krateo-runner:slow")
    write_run(kube, timeoutSeconds=1)
    kube.sync()
    name = run_status(kube)["jobRef"]["name"]
    assert wait_job_finished(kube, name) == "Failed"
    kube.sync()
    status = run_status(kube)
    assert (status["phase"], status["message"]) == ("Failed", "timed out after 1 s")


def test_a_failing_runner_fails_the_run_at_once(managed) -> None:
    kube, _ = managed
    write_config(kube, image="ghcr.io/krateoplatformops/kserve-krateo-runner:fail")
    write_run(kube)
    kube.sync()
    name = run_status(kube)["jobRef"]["name"]
    assert wait_job_finished(kube, name) == "Failed"
    kube.sync()
    status = run_status(kube)
    assert status["phase"] == "Failed" and "exit code 1" in status["message"]
    assert job(kube, name)["status"].get("failed") == 1  # no retries of a runner that exited non-zero


@pytest.mark.parametrize(
    ("policy", "outcome", "deleted"),
    [
        ("None", "Succeeded", False),
        ("DeleteOnSuccess", "Succeeded", True),
        ("DeleteOnSuccess", "Failed", False),
        ("DeleteOnCompletion", "Failed", True),
        ("DeleteOnCompletion", "Succeeded", True),
    ],
)
def test_auto_delete_policy(managed, policy: str, outcome: str, deleted: bool) -> None:
    kube, _ = managed
    tag = "0.1.0" if outcome == "Succeeded" else "fail"
    write_config(kube, autoDeletePolicy=policy, image=f"ghcr.io/krateoplatformops/kserve-krateo-runner:{tag}")
    write_run(kube)
    kube.sync()
    name = run_status(kube)["jobRef"]["name"]
    wait_job_finished(kube, name)
    kube.sync()
    kube.sync()
    assert run_status(kube)["phase"] == outcome
    if deleted:
        wait_for(lambda: job(kube, name) is None, message="the Job deleted")
        wait_for(lambda: not kube.list("v1", "Pod", label_selector=f"job-name={name}"), message="its pods collected")
    else:
        assert job(kube, name) is not None
    assert (kube.get("v1", "ConfigMap", f"{name}-contract") is None) == deleted


def test_deleting_the_run_collects_what_it_owned(managed, run) -> None:
    kube, _ = managed
    kube.sync()
    name = run_status(kube)["jobRef"]["name"]
    kube.remove(KIND, RUN)
    wait_for(lambda: job(kube, name) is None and kube.get("v1", "ConfigMap", f"{name}-contract") is None,
             timeout=30, message="the garbage collector to remove the Job and its contract")


def test_schedule_makes_a_cronjob_and_the_status_tells_the_last_and_next_run(managed) -> None:
    kube, _ = managed
    write_config(kube)
    created = write_run(kube, schedule="0 3 * * *")
    kube.sync()
    name = job_name(RUN, created["metadata"]["uid"], MAX_CRONJOB_NAME)
    cronjob = kube.get("batch/v1", "CronJob", name)
    assert cronjob["spec"]["schedule"] == "0 3 * * *"
    assert cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert job(kube, name) is None
    status = run_status(kube)
    assert status["phase"] == "Pending" and "scheduled '0 3 * * *'; not run yet; next run at " in status["message"]
    assert status["message"].endswith("T03:00:00Z")

    # A run now, as `kubectl create job --from=cronjob/...` makes it: the Job carries the template.
    manual = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{name}-manual",
            "namespace": kube.namespace,
            "labels": cronjob["spec"]["jobTemplate"]["metadata"]["labels"],
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": name,
                                 "uid": cronjob["metadata"]["uid"], "controller": True}],
        },
        "spec": cronjob["spec"]["jobTemplate"]["spec"],
    }
    kube.dynamic.resources.get(api_version="batch/v1", kind="Job").create(body=manual, namespace=kube.namespace)
    wait_job_finished(kube, f"{name}-manual")
    kube.sync()
    status = run_status(kube)
    assert status["phase"] == "Succeeded" and status["jobRef"]["name"] == f"{name}-manual"
    assert status["message"].startswith(f"last run {name}-manual: the runner finished; next run at ")
    kube.sync()
    assert run_status(kube)["phase"] == "Succeeded" and kube.get("batch/v1", "CronJob", name)  # kept, not re-run


def test_missing_config_keeps_the_run_pending_naming_it(managed) -> None:
    kube, _ = managed
    write_run(kube)
    kube.sync()
    status = run_status(kube)
    assert status["phase"] == "Pending"
    assert status["message"] == f"InferenceConfig {kube.namespace}/example-inference-config not found"


def test_contract_follows_edits_of_the_run(managed, run) -> None:
    kube, _ = managed
    kube.sync()
    name = run_status(kube)["jobRef"]["name"]
    edited = kube.read(KIND, RUN)
    edited["spec"]["parameters"] = {"input_table_name": "february"}
    kube.write(edited)
    kube.sync()
    configmap = kube.get("v1", "ConfigMap", f"{name}-contract")
    assert json.loads(configmap["data"]["contract.json"])["parameters"] == {"input_table_name": "february"}


def test_steady_state_sends_no_writes(managed, run) -> None:
    kube, _ = managed
    kube.sync()
    name = run_status(kube)["jobRef"]["name"]
    wait_job_finished(kube, name)
    kube.sync()
    assert kube.writes_during(lambda: (kube.sync(), kube.sync())) == []


def test_job_changes_reach_the_run_through_the_watch(managed, run) -> None:
    from tests.clusters.conftest import RunningWatch

    kube, cluster = managed
    watch = RunningWatch(cluster).start()
    try:
        wait_for(watch.ready, message="watchers ready")
        wait_for(lambda: run_status(kube).get("jobRef"), message="the Job from the run's watch event")
        name = run_status(kube)["jobRef"]["name"]
        assert job(kube, name)["metadata"]["labels"] == {"ai.krateo.io/inference-run": RUN}
        # kwok completes the pod, the Job controller the Job: only the Job's events reach the portal.
        wait_for(lambda: run_status(kube).get("phase") == "Succeeded", timeout=30, message="Succeeded from the Job")
    finally:
        watch.stop()
