"""The portal as InferenceRun controller, against the test API server (reference 003)."""

from __future__ import annotations

import json

import pytest

from runs_app.controller import job_name
from runs_app.models import InferenceRun
from tests.clusters.conftest import sample_manifest

NS = "kserve-controller-system"
KIND = InferenceRun.kube


@pytest.fixture
def run(managed):
    kube, _ = managed
    kube.write(sample_manifest("inferenceconfig-example-inference-config.yaml", NS))
    return kube.write(sample_manifest("inferencerun-iris-run-january.yaml", NS))


def job(kube, name: str) -> dict | None:
    return kube.server.get_object("batch", "v1", "jobs", NS, name)


def run_status(kube) -> dict:
    return kube.read(KIND, "iris-run-january", NS)["status"]


def set_job_status(kube, name: str, status: dict) -> None:
    kube.set_status("batch", "jobs", name, status, NS)


def set_policy(kube, policy: str) -> None:
    config = sample_manifest("inferenceconfig-example-inference-config.yaml", NS)
    config["spec"]["autoDeletePolicy"] = policy
    kube.write(config)


def test_contract_configmap_and_job_as_the_reference_describes(managed, run) -> None:
    kube, _ = managed
    kube.sync()
    uid = run["metadata"]["uid"]
    name = f"inf-iris-run-january-{uid.replace('-', '')[:8]}"
    created = job(kube, name)
    owner = {
        "apiVersion": "ai.krateo.io/v1",
        "kind": "InferenceRun",
        "name": "iris-run-january",
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert created["metadata"]["ownerReferences"] == [owner]
    pod = created["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert created["spec"]["activeDeadlineSeconds"] == 3600
    config = sample_manifest("inferenceconfig-example-inference-config.yaml", NS)
    assert pod["containers"][0]["image"] == config["spec"]["image"]
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "contract", "mountPath": "/etc/inference", "readOnly": True}
    ]
    assert pod["volumes"] == [{"name": "contract", "configMap": {"name": f"{name}-contract"}}]
    configmap = kube.server.get_object("", "v1", "configmaps", NS, f"{name}-contract")
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
    assert status["phase"] == "Pending" and status["jobRef"]["name"] == name
    assert json.loads(status["contract"]) == contract


def test_job_names_stay_dns_safe_and_at_most_63_characters() -> None:
    name = job_name("a-very-long-run-name-that-keeps-going.and.going-well-past-the-limit", "0123abcd-ffff")
    assert len(name) <= 63 and name.startswith("inf-a-very-long") and name.endswith("-0123abcd")
    assert all(part.isalnum() for part in name.split("-"))


def test_status_follows_the_job_through_running_to_succeeded(managed, run) -> None:
    kube, _ = managed
    kube.sync()
    name = run_status(kube)["jobRef"]["name"]
    set_job_status(kube, name, {"active": 1, "startTime": "2026-11-22T10:00:00Z"})
    kube.sync()
    status = run_status(kube)
    assert (status["phase"], status["startTime"]) == ("Running", "2026-11-22T10:00:00Z")
    set_job_status(
        kube,
        name,
        {
            "succeeded": 1,
            "startTime": "2026-11-22T10:00:00Z",
            "completionTime": "2026-11-22T10:04:00Z",
            "conditions": [{"type": "Complete", "status": "True"}],
        },
    )
    kube.sync()
    status = run_status(kube)
    assert (status["phase"], status["completionTime"]) == ("Succeeded", "2026-11-22T10:04:00Z")
    assert InferenceRun.objects.get(name="iris-run-january").phase == "Succeeded"


def test_a_succeeded_run_is_not_started_again_when_its_job_is_gone(managed, run) -> None:
    kube, _ = managed
    kube.sync()
    name = run_status(kube)["jobRef"]["name"]
    set_job_status(kube, name, {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]})
    kube.sync()
    kube.server.delete_object("batch", "v1", "jobs", NS, name)
    kube.sync()
    kube.sync()
    assert job(kube, name) is None
    assert run_status(kube)["phase"] == "Succeeded"


def test_timeout_fails_the_run(managed, run) -> None:
    kube, _ = managed
    kube.sync()
    name = run_status(kube)["jobRef"]["name"]
    set_job_status(
        kube,
        name,
        {
            "failed": 1,
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "DeadlineExceeded",
                    "message": "Job was active longer than specified deadline",
                }
            ],
        },
    )
    kube.sync()
    status = run_status(kube)
    assert (status["phase"], status["message"]) == ("Failed", "timed out after 3600 s")


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
def test_auto_delete_policy(managed, run, policy: str, outcome: str, deleted: bool) -> None:
    kube, _ = managed
    set_policy(kube, policy)
    kube.sync()
    name = run_status(kube)["jobRef"]["name"]
    finished = "Complete" if outcome == "Succeeded" else "Failed"
    set_job_status(kube, name, {"conditions": [{"type": finished, "status": "True", "reason": "BackoffLimitExceeded"}]})
    kube.sync()
    kube.sync()
    assert run_status(kube)["phase"] == outcome
    assert (job(kube, name) is None) == deleted
    assert (kube.server.get_object("", "v1", "configmaps", NS, f"{name}-contract") is None) == deleted


def test_schedule_makes_a_cronjob(managed) -> None:
    kube, _ = managed
    kube.write(sample_manifest("inferenceconfig-example-inference-config.yaml", NS))
    manifest = sample_manifest("inferencerun-iris-run-january.yaml", NS)
    manifest["spec"]["schedule"] = "0 3 * * *"
    created = kube.write(manifest)
    kube.sync()
    name = job_name("iris-run-january", created["metadata"]["uid"])
    cronjob = kube.server.get_object("batch", "v1", "cronjobs", NS, name)
    assert cronjob["spec"]["schedule"] == "0 3 * * *"
    assert cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert job(kube, name) is None
    assert run_status(kube)["phase"] == "Running" and "scheduled '0 3 * * *'" in run_status(kube)["message"]


def test_missing_config_keeps_the_run_pending_naming_it(managed) -> None:
    kube, _ = managed
    kube.write(sample_manifest("inferencerun-iris-run-january.yaml", NS))
    kube.sync()
    status = run_status(kube)
    assert status["phase"] == "Pending"
    assert status["message"] == f"InferenceConfig {NS}/example-inference-config not found"


def test_contract_follows_edits_of_the_run(managed, run) -> None:
    kube, _ = managed
    kube.sync()
    name = run_status(kube)["jobRef"]["name"]
    edited = kube.read(KIND, "iris-run-january", NS)
    edited["spec"]["parameters"] = {"input_table_name": "february"}
    kube.write(edited)
    kube.sync()
    configmap = kube.server.get_object("", "v1", "configmaps", NS, f"{name}-contract")
    assert json.loads(configmap["data"]["contract.json"])["parameters"] == {"input_table_name": "february"}


def test_job_changes_reach_the_run_through_the_watch(managed, run) -> None:
    from tests.clusters.conftest import RunningWatch, wait_for

    kube, cluster = managed
    watch = RunningWatch(cluster).start()
    try:
        wait_for(watch.ready, message="watchers ready")
        wait_for(
            lambda: (kube.read(KIND, "iris-run-january", NS).get("status") or {}).get("jobRef"),
            message="the Job from the run's watch event",
        )
        name = run_status(kube)["jobRef"]["name"]
        assert job(kube, name)["metadata"]["labels"] == {"ai.krateo.io/inference-run": "iris-run-january"}
        set_job_status(kube, name, {"active": 1, "startTime": "2026-11-22T10:00:00Z"})
        wait_for(lambda: run_status(kube).get("phase") == "Running", message="Running from the Job's event")
    finally:
        watch.stop()
