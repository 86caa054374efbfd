"""Run pages: submit (or rerun), list, cancel, and a run page whose status polls (htmx) until the run ends."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.public import CHANGE, VIEW, restrict
from clusters.kube.health import connected
from clusters.sync.audit import Actor
from clusters.web.forms import to_yaml
from clusters.web.portal import PORTAL, list_page, object_context, require_perm, visible_object
from clusters.web.services import assign_manifest, save_portal_edit
from runs_app.cancel import CancelRefused
from runs_app.cancel import cancel as cancel_run
from runs_app.cancel import refusal as cancel_refusal
from runs_app.charts import duration_chart
from runs_app.filtersets import InferenceRunFilterSet
from runs_app.forms import RunForm
from runs_app.models import InferenceConfig, InferenceRun

TERMINAL = ("Succeeded", "Failed")
CHART_RUNS = 30  # the latest runs of a config drawn on a run's page


@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    runs = restrict(InferenceRun.objects.select_related("cluster"), request.user, VIEW).order_by("-created_at")
    return list_page(
        request, InferenceRunFilterSet, runs, "runs_app/run_list.html",
        lambda page: {"duration_chart": duration_chart(page.object_list, "Durations of the runs listed")},
    )  # fmt: skip


@login_required
def submit_run(request: HttpRequest) -> HttpResponse:
    require_perm(request, InferenceRun, "add")
    form = RunForm(request.POST or None, user=request.user, initial={"config": request.GET.get("config")})
    if request.method == "POST" and form.is_valid():
        run = InferenceRun(cluster=form.cleaned_data["config"].cluster)
        assign_manifest(run, form.manifest)
        save_portal_edit(run, Actor.from_request(request, PORTAL), made_from=None)
        return redirect("run-page", pk=run.pk)
    return render(request, "runs_app/submit.html", {"form": form})


@login_required
def rerun(request: HttpRequest, pk: int) -> HttpResponse:
    """"Run again with these parameters": the submit form filled in from an earlier run (config,
    timeout, schedule, parameters) under a new name, to change what differs and submit."""
    require_perm(request, InferenceRun, "add")
    run = visible_object(request, InferenceRun, pk)
    configs = InferenceConfig.objects.filter(cluster=run.cluster, namespace=run.config_namespace, name=run.config_name)
    spec = run.spec or {}
    initial = {"config": configs.values_list("pk", flat=True).first(), "timeout_seconds": spec.get("timeoutSeconds"),
               "schedule": spec.get("schedule", "")}  # fmt: skip
    form = RunForm(user=request.user, initial=initial, parameters=spec.get("parameters") or {})
    return render(request, "runs_app/submit.html", {"form": form, "rerun_of": run})


@login_required
@require_POST
def cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """End a run that has not finished (see runs_app.cancel for what that means in the cluster)."""
    run = visible_object(request, InferenceRun, pk, CHANGE)
    require_perm(request, InferenceRun, "change")
    try:
        cancel_run(run, Actor.from_request(request, PORTAL))
    except CancelRefused as refused:
        messages.error(request, f"Cannot cancel {run.name}: {refused}")
    else:
        messages.success(request, f"Run {run.name} cancelled: its Job and pods are being deleted.")
    return redirect("run-page", pk=run.pk)


def decode_contract(value: Any) -> Any:
    """status.contract as JSON: the CRD declares it ``format: byte``, so it is base64 of the JSON
    (the raw text is shown when it is not)."""
    if not isinstance(value, str) or not value:
        return None
    text = _b64(value)
    try:
        return json.loads(text) if text is not None else value
    except ValueError:
        return value


def _b64(value: str) -> str | None:
    try:
        return base64.b64decode(value, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


def _status_context(run: InferenceRun) -> dict[str, Any]:
    """What the run page shows of the run's state, all of it read from its phase on: a run that
    ended has no active pods and no Cancel, whatever the last Job counts copied (issue 43: a
    Succeeded run showed "active 1" and *Cancel run*)."""
    status = run.status or {}
    contract = decode_contract(status.get("contract"))
    job = status.get("jobRef") or {}
    finished = status.get("phase") in TERMINAL
    job_status = status.get("jobStatus") or {}
    if finished:  # the Job's counts as last copied may predate its end: nothing of an ended run is active
        job_status = {key: value for key, value in job_status.items() if key != "active"}
    return {
        "phase": status.get("phase") or "Pending",
        "message": status.get("message", ""),
        "start": status.get("startTime"),
        "completion": status.get("completionTime"),
        "job": job,
        "job_status": job_status,
        "contract": json.dumps(contract, indent=2, sort_keys=True) if contract is not None else None,
        "contract_configmap": f"{job['name']}-contract" if job.get("name") else None,
        "finished": finished,
        "cancel_refused": cancel_refusal(run),
        "connected": connected(run.cluster),  # a snapshot never moves: no polling, and the page says why
        "conditions": status.get("conditions") if isinstance(status.get("conditions"), list) else [],
        "status_yaml": to_yaml({k: v for k, v in status.items() if k not in ("conditions", "contract")}),
    }


@login_required
def run_page(request: HttpRequest, pk: int) -> HttpResponse:
    run = visible_object(request, InferenceRun, pk)
    context = {**object_context(request, run), **_status_context(run)}
    config = InferenceConfig.objects.filter(cluster=run.cluster, namespace=run.config_namespace, name=run.config_name)
    context["config"] = restrict(config, request.user, VIEW).first()
    context["can_rerun"] = request.user.has_perm("runs_app.add_inferencerun")
    siblings = InferenceRun.objects.filter(
        cluster=run.cluster, config_namespace=run.config_namespace, config_name=run.config_name
    ).order_by("-created_at")
    context["duration_chart"] = duration_chart(
        restrict(siblings, request.user, VIEW)[:CHART_RUNS], f"Runs of {run.config_name}"
    )
    return render(request, "runs_app/run.html", context)


@login_required
def run_status(request: HttpRequest, pk: int) -> HttpResponse:
    """The live part of the run page, polled by htmx every 2 s until the phase is terminal; the
    answer that finds it ended also takes the page's Cancel away (``polled``: an out-of-band swap)."""
    run = visible_object(request, InferenceRun, pk)
    return render(request, "runs_app/_status.html", {"obj": run, "polled": True, **_status_context(run)})
