"""The portal as the InferenceRun controller (reference 003), for clusters that ask for it.

A run becomes a JSON *contract* in a ConfigMap (key ``contract.json``) and a runner Job named
``inf-<run>-<first 8 of uid>`` (at most 63 characters, DNS-safe) owned by the run, with
``restartPolicy: Never``, the contract mounted and ``activeDeadlineSeconds`` = ``timeoutSeconds``;
with a cron ``schedule`` it becomes a CronJob instead (at most 52 characters: the CronJob
controller appends an 11-character suffix to name its Jobs). ``status.contract`` is declared
``format: byte`` by the CRD, so it holds the contract's JSON base64-encoded, as the API server
requires. Owned objects are written with server-side apply, only when they differ
(``clusters.kube.owned``). The run's status follows the Job (phase
Pending / Running / Succeeded / Failed, start and completion times, message, conditions, a
reference to the Job); a missing InferenceConfig (``ConfigNotFound``) and a failed Job are
recorded as Warning Events on the run (``clusters.kube.failures``). ``autoDeletePolicy`` removes the Job
and its contract after success
(``DeleteOnSuccess``) or after any end (``DeleteOnCompletion``). Unlike the public controller, a
finished run is never started again when its Job disappears: the phase is checked first.
"""

from __future__ import annotations

import base64
import json
import re
from datetime import datetime
from typing import Any

from croniter import croniter

from clusters.kube.client import ClusterGateway, NotFoundError
from clusters.kube.conditions import as_rfc3339, rfc3339, set_condition
from clusters.kube.failures import ensure_backing_off, warn, with_failing
from clusters.kube.owned import controller_uid, label_value
from clusters.sync.inbound import upsert_from_cluster
from runs_app.models import InferenceConfig, InferenceRun

KIND = InferenceRun.kube
CONFIG_KIND = InferenceConfig.kube
TERMINAL = ("Succeeded", "Failed")
CONTRACT_KEY = "contract.json"
CONTRACT_DIR = "/etc/inference"
MAX_JOB_NAME = 63
MAX_CRONJOB_NAME = 52
JOB_LABEL = "ai.krateo.io/inference-run"
CONFIG_NOT_FOUND = "ConfigNotFound"
CANCELLED = "Cancelled"
FAILURES = {"Failed", CONFIG_NOT_FOUND}
"""The ``Ready`` reasons that say something is wrong (a Warning Event, the run's ``lastError``)."""


def job_name(run_name: str, uid: str, limit: int = MAX_JOB_NAME) -> str:
    """``inf-<run>-<uid[:8]>``, the run part shortened so the whole is a DNS label of at most
    ``limit`` characters (63 for a Job, ``MAX_CRONJOB_NAME`` for a CronJob)."""
    suffix = f"-{uid.replace('-', '')[:8]}"
    middle = re.sub(r"[^a-z0-9-]", "-", run_name.lower())[: limit - len("inf-") - len(suffix)].strip("-")
    return f"inf-{middle}{suffix}"


def encode_contract(contract: dict[str, Any]) -> str:
    """``status.contract`` (``format: byte``): the contract's JSON, base64-encoded."""
    return base64.b64encode(json.dumps(contract, sort_keys=True).encode()).decode()


def build_contract(run: dict[str, Any], config: dict[str, Any], name: str) -> dict[str, Any]:
    """The runner contract in the reference's shape; ``input``/``output`` passed through unmodified."""
    spec = config["spec"]
    return {
        "jobId": run["metadata"]["uid"],
        "jobName": name,
        "kserve": {key: spec.get(key, "") for key in ("modelName", "modelUrl", "modelVersion", "modelInputName")},
        "input": (spec.get("storage") or {}).get("input"),
        "output": (spec.get("storage") or {}).get("output"),
        "parameters": run["spec"].get("parameters") or {},
    }


def _labels(run: dict[str, Any]) -> dict[str, str]:
    return {JOB_LABEL: label_value(run["metadata"]["name"])}


def _owner(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": KIND.api_version,
            "kind": KIND.kind,
            "name": run["metadata"]["name"],
            "uid": run["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def _job_spec(run: dict[str, Any], config: dict[str, Any], name: str) -> dict[str, Any]:
    labels = {**_labels(run), "ai.krateo.io/job": name}
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "runner",
                "image": config["spec"]["image"],
                "env": [{"name": "CONTRACT_PATH", "value": f"{CONTRACT_DIR}/{CONTRACT_KEY}"}],
                "volumeMounts": [{"name": "contract", "mountPath": CONTRACT_DIR, "readOnly": True}],
            }
        ],
        "volumes": [{"name": "contract", "configMap": {"name": f"{name}-contract"}}],
    }
    credentials = (config["spec"].get("credentialsRef") or {}).get("name")
    if credentials:
        pod["imagePullSecrets"] = [{"name": credentials}]
    spec: dict[str, Any] = {
        "template": {"metadata": {"labels": labels}, "spec": pod},
        # A runner that exits non-zero has failed: fail the run at once instead of retrying it six
        # times with growing back-off; a pod lost to a disruption (eviction, node drain) is retried.
        "podFailurePolicy": {
            "rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": "runner", "operator": "NotIn", "values": [0]}},
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            ]
        },
    }
    if run["spec"].get("timeoutSeconds"):
        spec["activeDeadlineSeconds"] = run["spec"]["timeoutSeconds"]
    return spec


def reconcile_inference_run(gateway: ClusterGateway, row: InferenceRun, now: datetime) -> str:
    try:
        run = gateway.get(KIND, row.namespace, row.name)
    except NotFoundError:
        return "gone"
    status = dict(run.get("status") or {})
    scheduled = bool(run["spec"].get("schedule"))
    name = job_name(run["metadata"]["name"], run["metadata"]["uid"], MAX_CRONJOB_NAME if scheduled else MAX_JOB_NAME)
    jobs, cronjobs = gateway.builtin("batch/v1", "Job"), gateway.builtin("batch/v1", "CronJob")
    configmaps = gateway.builtin("v1", "ConfigMap")
    if status.get("phase") in TERMINAL and not scheduled:
        outcome = _auto_delete(gateway, row, run, status, name, now)
    else:
        config_ref = run["spec"].get("configRef") or {}
        try:
            config = gateway.get(CONFIG_KIND, config_ref.get("namespace") or row.namespace, config_ref["name"])
        except NotFoundError:
            config = None
        if config is None:
            status.update(
                _phase(
                    status,
                    "Pending",
                    f"InferenceConfig {config_ref.get('namespace') or row.namespace}/"
                    f"{config_ref.get('name')} not found",
                    now,
                    run,
                    reason=CONFIG_NOT_FOUND,
                )
            )
            outcome = "waiting for config"
        else:
            contract = build_contract(run, config, name)
            status["contract"] = encode_contract(contract)
            ensure_backing_off(configmaps, run, _contract_configmap(run, name, contract), now)
            if scheduled:
                outcome = _ensure_cronjob(cronjobs, jobs, run, config, name, status, now)
            else:
                outcome = _ensure_job(jobs, run, config, name, status, now)
        warn(gateway, KIND, {**run, "status": status}, now)
    if status != (run.get("status") or {}):
        run = gateway.patch_status(KIND, row.namespace, row.name, status)
        upsert_from_cluster(InferenceRun, row.cluster, run)
    return outcome


def _contract_configmap(run: dict[str, Any], name: str, contract: dict[str, Any]) -> dict[str, Any]:
    """The contract ConfigMap, kept equal to the run and its config (edits reach the next Job)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-contract", "namespace": run["metadata"]["namespace"],
                     "ownerReferences": _owner(run)},
        "data": {CONTRACT_KEY: json.dumps(contract, indent=2)},
    }


def _phase(status: dict[str, Any], phase: str, message: str, now: datetime, run: dict[str, Any],
           reason: str = "") -> dict[str, Any]:
    """The run's phase and message, and its ``Ready`` condition (``reason`` defaults to the phase)."""
    generation = run["metadata"].get("generation")
    conditions = set_condition(status.get("conditions"), "Ready", phase == "Succeeded", reason or phase, message, now,
                               generation)
    conditions = with_failing(run.get("kind") or "InferenceRun", conditions, now, generation)
    return {"phase": phase, "message": message, "conditions": conditions, "observedGeneration": generation}


def _ensure_job(jobs, run, config, name, status, now) -> str:
    namespace = run["metadata"]["namespace"]
    job = jobs.get(namespace, name)
    if job is None:
        if status.get("jobRef"):
            status.update(_phase(status, "Failed", f"Job {name} was deleted before it finished", now, run))
            status.setdefault("completionTime", rfc3339(now))
            return "job lost"
        job = ensure_backing_off(
            jobs,
            run,
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": name, "namespace": namespace, "ownerReferences": _owner(run),
                             "labels": _labels(run)},
                "spec": _job_spec(run, config, name),
            },
            now,
        )
        status["jobRef"] = {"name": name, "namespace": namespace, "uid": job["metadata"].get("uid", "")}
    return _follow_job(job, run, status, now)


def _follow_job(job: dict[str, Any], run: dict[str, Any], status: dict[str, Any], now: datetime) -> str:
    """The run's phase, times and message from its (latest) Job, as the Job controller reports it."""
    observed = job.get("status") or {}
    status["jobStatus"] = {key: observed[key] for key in ("active", "succeeded", "failed", "ready") if key in observed}
    if observed.get("startTime"):
        status["startTime"] = as_rfc3339(observed["startTime"])
    finished = {c.get("type"): c for c in observed.get("conditions") or [] if c.get("status") == "True"}
    if "Complete" in finished or ((observed.get("succeeded") or 0) > 0 and not observed.get("active")):
        status.update(_phase(status, "Succeeded", "the runner finished", now, run))
        status["completionTime"] = (
            as_rfc3339(observed["completionTime"]) if observed.get("completionTime") else rfc3339(now)
        )
    elif "Failed" in finished:
        failure = finished["Failed"]
        message = (
            f"timed out after {run['spec'].get('timeoutSeconds')} s"
            if failure.get("reason") == "DeadlineExceeded"
            else failure.get("message") or failure.get("reason") or "the runner failed"
        )
        status.update(_phase(status, "Failed", message, now, run))
        status["completionTime"] = rfc3339(now)
    elif observed.get("active") or observed.get("startTime"):
        status.update(_phase(status, "Running", "the runner is working", now, run))
    else:
        status.update(_phase(status, "Pending", "the runner Job is waiting to start", now, run))
    return status["phase"]


def _ensure_cronjob(cronjobs, jobs, run, config, name, status, now) -> str:
    """A scheduled run is a CronJob; its status tells the state of the latest run (the CronJob's
    newest Job: Running, Succeeded or Failed; Pending before the first) and when the next is due."""
    namespace = run["metadata"]["namespace"]
    schedule = run["spec"]["schedule"]
    body = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": namespace, "ownerReferences": _owner(run), "labels": _labels(run)},
        "spec": {
            "schedule": schedule,
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {
                "metadata": {"labels": _labels(run)},
                "spec": _job_spec(run, config, name),
            },
        },
    }
    cronjob = ensure_backing_off(cronjobs, run, body, now)
    next_run = rfc3339(croniter(schedule, now).get_next(datetime))
    latest = _latest_job_of(jobs, cronjob, run)
    if latest is None:
        status["jobRef"] = {"name": name, "namespace": namespace, "uid": cronjob["metadata"].get("uid", "")}
        status.update(_phase(status, "Pending", f"scheduled '{schedule}'; not run yet; next run at {next_run}", now,
                             run))
        return "scheduled"
    status["jobRef"] = {"name": latest["metadata"]["name"], "namespace": namespace,
                        "uid": latest["metadata"].get("uid", "")}
    phase = _follow_job(latest, run, status, now)
    message = f"last run {latest['metadata']['name']}: {status['message']}; next run at {next_run}"
    status.update(_phase(status, phase, message, now, run))
    return f"scheduled; last run {phase}"


def _latest_job_of(jobs, cronjob: dict[str, Any], run: dict[str, Any]) -> dict[str, Any] | None:
    """The newest Job the CronJob owns (scheduled, or made by hand with ``kubectl create job --from``);
    its Jobs carry the job template's labels."""
    uid = cronjob["metadata"].get("uid")
    selector = ",".join(f"{key}={value}" for key, value in _labels(run).items())
    items, _ = jobs.list(selector, cronjob["metadata"]["namespace"])
    owned = [job for job in items if controller_uid(job) == uid]
    return max(owned, key=lambda job: job["metadata"].get("creationTimestamp") or "", default=None)


def _auto_delete(gateway: ClusterGateway, row: InferenceRun, run, status, name, now) -> str:
    """Apply autoDeletePolicy once the run has ended; the Job is never re-created."""
    policy = "None"
    config_ref = run["spec"].get("configRef") or {}
    try:
        config = gateway.get(CONFIG_KIND, config_ref.get("namespace") or row.namespace, config_ref.get("name", ""))
        policy = config["spec"].get("autoDeletePolicy", "None")
    except NotFoundError:
        pass
    wanted = policy == "DeleteOnCompletion" or (policy == "DeleteOnSuccess" and status["phase"] == "Succeeded")
    done = any(c.get("type") == "JobDeleted" for c in status.get("conditions") or [])
    if not wanted or done:
        return f"{status['phase']} (kept)" if not wanted else f"{status['phase']} (cleaned)"
    gateway.builtin("batch/v1", "Job").delete(row.namespace, name)
    gateway.builtin("v1", "ConfigMap").delete(row.namespace, f"{name}-contract")
    status["conditions"] = set_condition(
        status.get("conditions"), "JobDeleted", True, policy, f"Job {name} and its contract deleted ({policy})", now
    )
    return f"{status['phase']} (deleted by {policy})"


def cancel_in_cluster(gateway: ClusterGateway, row: InferenceRun, message: str, now: datetime) -> dict[str, Any]:
    """End a run early: its status says Failed with ``message`` (reason ``Cancelled``), then its Job
    goes with its pods (background propagation) and the contract ConfigMap with it.

    The status is written first: a reconcile checks the phase before anything else and leaves a
    finished run alone, so the Job is never re-created nor the run reported as "Job lost".
    Returns the run as the cluster has it afterwards.
    """
    run = gateway.get(KIND, row.namespace, row.name)
    status = dict(run.get("status") or {})
    status.update(_phase(status, "Failed", message, now, run, reason=CANCELLED))
    status["conditions"] = set_condition(status["conditions"], CANCELLED, True, CANCELLED, message, now)
    status["completionTime"] = rfc3339(now)
    run = gateway.patch_status(KIND, row.namespace, row.name, status)
    job = (status.get("jobRef") or {}).get("name")
    if job:
        gateway.builtin("batch/v1", "Job").delete(row.namespace, job)
        gateway.builtin("v1", "ConfigMap").delete(row.namespace, f"{job}-contract")
    return run
