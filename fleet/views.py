"""Fleet pages: pods and events of every cluster and namespace the person may see, and the audit
log of every object they may see. Access is the teams' grants (accounts.access); reads are
fleet.live's; the audit log is a filtered list like the others (clusters.portal.list_page)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.public import VIEW, restrict, visible_clusters
from clusters.kinds import all_models
from clusters.models import AuditEntry
from clusters.web.portal import list_page, obj_url
from fleet.filtersets import AuditEntryFilterSet
from fleet.live import MAX_ROWS, matches, read_fleet
from fleet.scopes import fleet_scopes

POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
EVENT_TYPES = ("Normal", "Warning")


def _fleet_context(request: HttpRequest, events: bool) -> dict[str, Any]:
    params = request.GET
    scopes, snapshots = fleet_scopes(request.user, params.get("cluster", ""), params.get("namespace", ""))
    fleet = read_fleet(scopes, events)
    return {
        "params": params, "fleet": fleet, "snapshots": snapshots, "scopes": scopes, "max_rows": MAX_ROWS,
        "clusters": visible_clusters(request.user).order_by("name").values_list("name", flat=True),
    }  # fmt: skip


@login_required
def pods_page(request: HttpRequest) -> HttpResponse:
    context = _fleet_context(request, events=False)
    q, phase = request.GET.get("q", ""), request.GET.get("phase", "")
    rows = [pod for pod in context["fleet"].pods if matches(q, pod.row.name, pod.owner.text, pod.owner.mirrored)
            and (not phase or pod.row.phase == phase)]  # fmt: skip
    return render(request, "fleet/pods.html", {**context, "rows": rows[:MAX_ROWS], "total": len(rows),
                                               "phases": POD_PHASES})  # fmt: skip


@login_required
def events_page(request: HttpRequest) -> HttpResponse:
    context = _fleet_context(request, events=True)
    q, kind = request.GET.get("q", ""), request.GET.get("type", "")
    rows = [event for event in context["fleet"].events
            if matches(q, event.row.involved, event.row.reason, event.row.message, event.owner.mirrored)
            and (not kind or event.row.type == kind)]  # fmt: skip
    return render(request, "fleet/events.html", {**context, "rows": rows[:MAX_ROWS], "total": len(rows),
                                                 "types": EVENT_TYPES})  # fmt: skip


def _with_object_urls(entries: list[AuditEntry]) -> list[AuditEntry]:
    """Each entry with ``object_url``, its object's page where the object still exists ("" when deleted)."""
    urls = {}
    for model in all_models():
        kind = model.kube.kind
        ids = {entry.object_id for entry in entries if entry.kind == kind}
        for pk in model.objects.filter(pk__in=ids).values_list("pk", flat=True) if ids else ():
            urls[(kind, pk)] = obj_url(model(pk=pk))
    for entry in entries:
        entry.object_url = urls.get((entry.kind, entry.object_id), "")
    return entries


@login_required
def audit_page(request: HttpRequest) -> HttpResponse:
    entries = restrict(AuditEntry.objects.all(), request.user, VIEW)
    return list_page(
        request, AuditEntryFilterSet, entries, "fleet/audit.html",
        lambda page: {"entries": _with_object_urls(list(page.object_list)),
                      "kinds": [m.kube.kind for m in all_models()], "actions": AuditEntry.Action.choices},
    )  # fmt: skip
