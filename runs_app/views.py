"""Run pages: submit, list, and a run page whose status polls (htmx) until the run ends."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from accounts.access import VIEW, restrict
from clusters.audit import Actor
from clusters.forms import to_yaml
from clusters.models import Cluster
from clusters.portal import PORTAL, non_empty, object_context, visible_object
from clusters.services import assign_manifest, save_portal_edit
from runs_app.filtersets import InferenceRunFilterSet
from runs_app.forms import RunForm
from runs_app.models import InferenceRun

TERMINAL = ("Succeeded", "Failed")
PAGE_SIZE = 25


@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    runs = restrict(InferenceRun.objects.select_related("cluster"), request.user, VIEW).order_by("-created_at")
    filterset = InferenceRunFilterSet(non_empty(request.GET), queryset=runs)
    if not filterset.is_valid():
        field, errors = next(iter(filterset.errors.items()))
        return HttpResponse(f"{field}: {request.GET.get(field)!r} {errors[0]}", status=400, content_type="text/plain")
    page = Paginator(filterset.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "runs_app/run_list.html",
        {"page": page, "params": request.GET, "query": query.urlencode(),
         "clusters": Cluster.objects.values_list("name", flat=True)},
    )  # fmt: skip


@login_required
def submit_run(request: HttpRequest) -> HttpResponse:
    if not request.user.has_perm("runs_app.add_inferencerun"):
        raise PermissionDenied("you need runs_app.add_inferencerun")
    form = RunForm(request.POST or None, user=request.user, initial={"config": request.GET.get("config")})
    if request.method == "POST" and form.is_valid():
        run = InferenceRun(cluster=form.cleaned_data["config"].cluster)
        assign_manifest(run, form.manifest)
        save_portal_edit(run, Actor.from_request(request, PORTAL), made_from=None)
        return redirect("run-page", pk=run.pk)
    return render(request, "runs_app/submit.html", {"form": form})


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
    status = run.status or {}
    contract = decode_contract(status.get("contract"))
    job = status.get("jobRef") or {}
    return {
        "phase": status.get("phase") or "Pending",
        "message": status.get("message", ""),
        "start": status.get("startTime"),
        "completion": status.get("completionTime"),
        "job": job,
        "job_status": status.get("jobStatus") or {},
        "contract": json.dumps(contract, indent=2, sort_keys=True) if contract is not None else None,
        "contract_configmap": f"{job['name']}-contract" if job.get("name") else None,
        "finished": status.get("phase") in TERMINAL,
        "conditions": status.get("conditions") if isinstance(status.get("conditions"), list) else [],
        "status_yaml": to_yaml({k: v for k, v in status.items() if k not in ("conditions", "contract")}),
    }


@login_required
def run_page(request: HttpRequest, pk: int) -> HttpResponse:
    run = visible_object(request, InferenceRun, pk)
    return render(request, "runs_app/run.html", {**object_context(request, run), **_status_context(run)})


@login_required
def run_status(request: HttpRequest, pk: int) -> HttpResponse:
    """The live part of the run page, polled by htmx every 2 s until the phase is terminal."""
    run = visible_object(request, InferenceRun, pk)
    return render(request, "runs_app/_status.html", {"obj": run, **_status_context(run)})
