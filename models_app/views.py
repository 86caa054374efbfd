"""Portal pages of the serving kinds: catalog, model page, create/edit forms and YAML mode.

Thin views: filtering is the kinds' FilterSets (models_app.catalog), access is
accounts.access.restrict, writes are clusters.web.services through clusters.web.portal's forms.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from accounts.public import VIEW, restrict
from clusters.models import Cluster, KubeObject, SyncState
from clusters.web import list_costs
from clusters.web.forms import crd_enum
from clusters.web.portal import (
    KubeObjectPageForm,
    ManifestForm,
    ResolveConflictView,
    bad_request,
    edit_page,
    mode_urls,
    non_empty,
    object_context,
    visible_object,
)
from models_app.catalog import COLUMN_LABELS, CatalogError, catalog, filter_choices, parse_cursor
from models_app.charts import memory_chart
from models_app.forms import FORMS
from models_app.models import InferenceModel, KubeAIModel, ModelService, ServingModel
from models_app.traffic import traffic
from runs_app.models import InferenceConfig, InferenceRun

KINDS: dict[str, type[KubeObject]] = {model.url_slug: model for model in (InferenceModel, KubeAIModel, ModelService)}
PAGE_SIZE = 25


def _model(kind: str) -> type[KubeObject]:
    if kind not in KINDS:
        raise Http404(f"no kind {kind!r}; one of {', '.join(KINDS)}")
    return KINDS[kind]


@login_required
def catalog_page(request: HttpRequest) -> HttpResponse:
    params = non_empty(request.GET)
    try:
        rows = catalog(params, request.user)
        cursor = parse_cursor(params["cursor"], rows.ordering) if "cursor" in params else None
    except CatalogError as error:
        return bad_request(request, str(error))
    page = rows.page(cursor, PAGE_SIZE)
    query = request.GET.copy()
    query.pop("cursor", None)
    query.pop("page", None)  # the former numbered pages' links: the first page
    sort_query = query.copy()
    sort_query.pop("ordering", None)
    return render(
        request,
        "models_app/catalog.html",
        {
            "page": page,
            "count": rows.count(),
            "count_estimated": rows.estimated,
            "count_bound": list_costs.COUNT_BOUND,
            "at_start": cursor is None,
            "at_end": cursor is not None and cursor.last,
            "params": request.GET,
            "query": query.urlencode(),
            "sort_query": sort_query.urlencode(),
            "columns": COLUMN_LABELS,
            "features": [value for value, _ in crd_enum(KubeAIModel, "features", "[]") if value],
            "ordering": rows.ordering,
            "clusters": Cluster.objects.values_list("name", flat=True),
            "sync_states": SyncState.choices,
            "kinds": [(slug, model) for slug, model in KINDS.items()],
            **filter_choices(request.user),
        },
    )


def configs_using(model: KubeObject, user: Any) -> QuerySet:
    """The InferenceConfigs (same cluster) whose KServe modelName is this model's modelName."""
    if not model.model_name:
        return InferenceConfig.objects.none()
    return restrict(InferenceConfig.objects.filter(cluster=model.cluster, model_name=model.model_name), user, VIEW)


def runs_using(model: KubeObject, user: Any) -> list[InferenceRun]:
    """InferenceRuns whose InferenceConfig's modelName is this model's modelName (same cluster)."""
    configs = configs_using(model, user)
    pairs = Q()
    for namespace, name in configs.values_list("namespace", "name"):
        pairs |= Q(config_namespace=namespace, config_name=name)
    if not pairs:
        return []
    runs = InferenceRun.objects.filter(cluster=model.cluster).filter(pairs).order_by("-created_at")
    return list(restrict(runs, user, VIEW)[:20])


def wake_url(model: KubeObject) -> str | None:
    """The wake endpoint, for InferenceModels of clusters where the portal is the controller."""
    if isinstance(model, InferenceModel) and model.cluster.manages("InferenceModel"):
        return reverse("inferencemodel-wake", args=[model.pk])
    return None


@login_required
def model_page(request: HttpRequest, kind: str, pk: int) -> HttpResponse:
    model = _model(kind)
    obj = visible_object(request, model, pk)
    context = object_context(request, obj)
    context.update(
        kind_slug=kind,
        runs=runs_using(obj, request.user),
        run_config=configs_using(obj, request.user).order_by("namespace", "name").first(),
        can_run=request.user.has_perm("runs_app.add_inferencerun"),
        wake_url=wake_url(obj),
        keda_url=reverse(f"{model._meta.model_name}-keda-scaledobject", args=[obj.pk]) + "?output=yaml",
        chart=memory_chart(obj) if isinstance(obj, InferenceModel) else "",
        traffic=traffic(obj) if isinstance(obj, ServingModel) else None,
        recommendation=(obj.status or {}).get("recommendation", ""),
        can_apply=isinstance(obj, InferenceModel)
        and context["can_change"]
        and bool((obj.status or {}).get("recommendation")),
    )
    return render(request, "models_app/model.html", context)


@login_required
def model_form(request: HttpRequest, kind: str, pk: int | None = None) -> HttpResponse:
    """Create (no pk) or edit one serving model with the kind's form."""
    model = _model(kind)
    form_class = FORMS[model]

    def make_form(obj: KubeObject | None) -> KubeObjectPageForm:
        # a new object may arrive pre-filled from a link (the calculator's "create this model")
        initial = form_class.initial_from_query(request.GET) if obj is None and request.method == "GET" else {}
        return form_class(request.POST or None, user=request.user, instance=obj, initial=initial)

    return edit_page(request, model, pk, make_form, "portal/object_form.html", **mode_urls("model", pk, kind))


@login_required
def model_yaml(request: HttpRequest, kind: str, pk: int | None = None) -> HttpResponse:
    """YAML mode: paste a manifest; every error is listed with its path."""
    model = _model(kind)
    return edit_page(
        request, model, pk,
        lambda obj: ManifestForm(request.POST or None, user=request.user, model=model, instance=obj),
        "portal/object_yaml.html", **mode_urls("model", pk, kind),
    )  # fmt: skip


def resolve_view(model: type[KubeObject]):
    return ResolveConflictView.as_view(model=model)
