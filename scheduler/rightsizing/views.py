"""Right-sizing pages: the report with charts, one model's history, exports, refresh and apply."""

from __future__ import annotations

import csv

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from accounts.public import CHANGE, VIEW, restrict, visible_cluster_ids
from clusters.models import Cluster
from clusters.sync.audit import Actor
from clusters.validation.quantities import format_bytes
from clusters.validation.schemas import ManifestInvalid, clip
from scheduler.rightsizing.apply import apply_recommendation
from scheduler.rightsizing.charts import gpu_chart, model_chart, pool_chart
from scheduler.rightsizing.conf import default_policy
from scheduler.rightsizing.filters import report_filters
from scheduler.rightsizing.kinds import (
    DEFAULT_SLUG,
    applicable,
    apply_kinds,
    kind_for_slug,
    may_refresh,
)
from scheduler.rightsizing.models import Observation
from scheduler.rightsizing.refresh import refresh_clusters
from scheduler.rightsizing.report import (
    ReportRow,
    build_report,
    last_refreshes,
    pool_totals,
    report_figures,
    row_for,
)

CSV_COLUMNS = [name for name in ReportRow.__dataclass_fields__]


PAGE_SIZE = 50


def _visible(request: HttpRequest, slug: str, action: str = VIEW) -> QuerySet:
    """The objects of the URL's kind in the user's teams' namespaces (every one for staff)."""
    return restrict(kind_for_slug(slug).objects.select_related("cluster"), request.user, action)


def _observations(request: HttpRequest) -> QuerySet:
    """The observations of objects in the user's teams' namespaces."""
    return restrict(Observation.objects.all(), request.user, VIEW)


def _bad_filters(error: ManifestInvalid) -> HttpResponse:
    return HttpResponse("\n".join(e.message for e in error.errors), status=400, content_type="text/plain")


@login_required
def report_page(request: HttpRequest) -> HttpResponse:
    """One page of the report (50 rows), the pool totals of the whole filtered report, the refreshes."""
    try:
        filters = report_filters(request.GET)
    except ManifestInvalid as error:
        return _bad_filters(error)
    observations = build_report(_observations(request), **filters)
    count, totals = report_figures(observations)
    paginator = Paginator(observations, PAGE_SIZE)
    paginator.count = count  # a cached_property: the cached COUNT spares the page its own
    page = paginator.get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("ordering", None)
    query.pop("page", None)
    paging = request.GET.copy()
    paging.pop("page", None)
    return render(
        request,
        "rightsizing/report.html",
        {
            "rows": [row_for(observation) for observation in page],
            "page": page,
            "paging_query": paging.urlencode(),
            "pools": totals,
            "pool_chart": pool_chart(totals) if totals else "",
            "refreshes": last_refreshes(visible_cluster_ids(request.user)),
            "filters": filters,
            "clusters": Cluster.objects.values_list("name", flat=True),
            "query_without_ordering": query.urlencode(),
            "export_query": request.GET.urlencode(),
            "can_change": may_refresh(request.user),
            "apply_kinds": apply_kinds(request.user),
        },
    )


@login_required
def model_page(request: HttpRequest, pk: int, kind: str = DEFAULT_SLUG) -> HttpResponse:
    """One object's history: memory, GPU memory and CPU over time, and every observation."""
    serving_kind = kind_for_slug(kind)
    history = list(
        _observations(request)
        .filter(kind=serving_kind.kube.kind, object_id=pk)
        .select_related("cluster")
        .order_by("observed_at")
    )
    model = _visible(request, kind).filter(pk=pk).first()
    if not history and model is None:
        raise Http404("no observation of this object that you may see")
    latest = history[-1] if history else None
    title = f"{latest.namespace}/{latest.name}" if latest else f"{model.namespace}/{model.name}"
    return render(
        request,
        "rightsizing/model.html",
        {
            "model": model,
            "latest": latest,
            "title": title,
            "cluster_name": latest.cluster.name if latest else model.cluster.name,
            "history": list(reversed(history)),
            "chart": model_chart(f"{title}: memory (GiB)", history) if history else "",
            "gpu_chart": gpu_chart(f"{title}: GPU memory (GiB)", history),
            "slug": kind,
            "can_change": model is not None
            and applicable(serving_kind)
            and request.user.has_perm(serving_kind.permission("change")),
        },
    )


@login_required
def export(request: HttpRequest, fmt: str) -> HttpResponse:
    """The report as CSV or JSON, with the page's filters and ordering (all pages, streamed from SQL)."""
    try:
        observations = build_report(_observations(request), **report_filters(request.GET))
    except ManifestInvalid as error:
        return _bad_filters(error)
    rows = (row_for(observation) for observation in observations.iterator(chunk_size=2000))
    if fmt == "json":
        body = {
            "models": [row.as_dict() for row in rows],
            "pools": [vars(total) for total in pool_totals(observations)],
        }
        response = JsonResponse(body, encoder=DjangoJSONEncoder, json_dumps_params={"indent": 2})
    else:
        response = HttpResponse(content_type="text/csv")
        writer = csv.DictWriter(response, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({**row.as_dict(), "observed_at": row.observed_at.isoformat()})
    response["Content-Disposition"] = f'attachment; filename="rightsizing.{fmt}"'
    return response


@require_POST
@login_required
def refresh(request: HttpRequest) -> HttpResponse:
    if not may_refresh(request.user):
        raise PermissionDenied("refreshing writes the right-sizing status of every team's objects: staff only")
    name = request.POST.get("cluster") or None  # the form's "all clusters" is empty
    if name is not None and not Cluster.objects.filter(name=name).exists():
        messages.error(request, f'cluster: "{clip(name)}" is not a registered cluster')
    for done in refresh_clusters(name, visible_cluster_ids(request.user, CHANGE)):
        if done.ok:
            messages.success(
                request, f"{done.cluster.name}: {done.models_with_data}/{done.models_seen} models with data"
            )
        else:
            messages.error(request, f"{done.cluster.name}: {done.error}")
    return redirect("rightsizing-report")


@require_POST
@login_required
def apply(request: HttpRequest, pk: int, kind: str = DEFAULT_SLUG) -> HttpResponse:
    if not request.user.has_perm(kind_for_slug(kind).permission("change")):
        raise PermissionDenied("applying a recommendation edits the object: it needs the right to change it")
    model = get_object_or_404(_visible(request, kind, CHANGE), pk=pk)
    try:
        applied = apply_recommendation(model, default_policy(), Actor.from_request(request, "portal"))
    except ManifestInvalid as error:
        messages.error(request, "; ".join(e.message for e in error.errors))
    else:
        memory = format_bytes(applied.pod_resources().memory_bytes)
        messages.success(request, f"{applied}: {applied.pod_memory_path} set to {memory}; it syncs to the cluster")
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = "rightsizing-report"
    return redirect(target)
