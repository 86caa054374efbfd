"""Portal pages of the serving kinds: catalog, model page, create/edit forms and YAML mode.

Thin views: filtering is the kinds' FilterSets (models_app.catalog), access is
accounts.access.restrict, writes are clusters.services through clusters.portal's forms.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.safestring import mark_safe

from accounts.access import CHANGE, VIEW, restrict
from clusters.audit import Actor
from clusters.models import Cluster, KubeObject, SyncState
from clusters.portal import (
    PORTAL,
    KubeObjectPageForm,
    ManifestForm,
    ResolveConflictView,
    non_empty,
    obj_url,
    object_context,
    visible_object,
)
from models_app.catalog import COLUMN_LABELS, CatalogError, catalog, filter_choices
from models_app.charts import memory_chart
from models_app.forms import FORMS, crd_enum
from models_app.models import InferenceModel, KubeAIModel, ModelService
from runs_app.models import InferenceConfig, InferenceRun

KINDS: dict[str, type[KubeObject]] = {
    "inferencemodels": InferenceModel,
    "kubeai-models": KubeAIModel,
    "modelservices": ModelService,
}
PAGE_SIZE = 25


def _model(kind: str) -> type[KubeObject]:
    if kind not in KINDS:
        raise Http404(f"no kind {kind!r}; one of {', '.join(KINDS)}")
    return KINDS[kind]


@login_required
def catalog_page(request: HttpRequest) -> HttpResponse:
    try:
        rows = catalog(non_empty(request.GET), request.user)
    except CatalogError as error:
        return HttpResponse(str(error), status=400, content_type="text/plain")
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    sort_query = query.copy()
    sort_query.pop("ordering", None)
    return render(
        request,
        "models_app/catalog.html",
        {
            "page": page,
            "params": request.GET,
            "query": query.urlencode(),
            "sort_query": sort_query.urlencode(),
            "columns": COLUMN_LABELS,
            "features": [value for value, _ in crd_enum(KubeAIModel, "features", "[]") if value],
            "ordering": request.GET.get("ordering", "name"),
            "clusters": Cluster.objects.values_list("name", flat=True),
            "sync_states": SyncState.choices,
            "kinds": [(slug, model) for slug, model in KINDS.items()],
            **filter_choices(request.user),
        },
    )


def runs_using(model: KubeObject, user: Any) -> list[InferenceRun]:
    """InferenceRuns whose InferenceConfig's modelName is this model's modelName (same cluster)."""
    if not model.model_name:
        return []
    configs = restrict(InferenceConfig.objects.filter(cluster=model.cluster, model_name=model.model_name), user, VIEW)
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
        wake_url=wake_url(obj),
        # pygal escapes every label it draws; the SVG is ours, not user HTML.
        chart=mark_safe(memory_chart(obj)) if isinstance(obj, InferenceModel) else "",
        recommendation=(obj.status or {}).get("recommendation", ""),
        can_apply=isinstance(obj, InferenceModel)
        and context["can_change"]
        and bool((obj.status or {}).get("recommendation")),
    )
    return render(request, "models_app/model.html", context)


def _require_perm(request: HttpRequest, model: type[KubeObject], action: str) -> None:
    meta = model._meta
    if not request.user.has_perm(f"{meta.app_label}.{action}_{meta.model_name}"):
        raise PermissionDenied(f"you need {meta.app_label}.{action}_{meta.model_name}")


def _save_valid(request: HttpRequest, form: KubeObjectPageForm | ManifestForm) -> KubeObject | None:
    """Validate and save a posted form in one transaction: its version check locks the row until saved."""
    if request.method != "POST":
        return None
    with transaction.atomic():
        return form.save(Actor.from_request(request, PORTAL)) if form.is_valid() else None


@login_required
def model_form(request: HttpRequest, kind: str, pk: int | None = None) -> HttpResponse:
    """Create (no pk) or edit one serving model with the kind's form."""
    model = _model(kind)
    obj = visible_object(request, model, pk, CHANGE) if pk else None
    _require_perm(request, model, "change" if obj else "add")
    form_class = FORMS[model]
    initial = form_class.initial_from_query(request.GET) if obj is None and request.method == "GET" else {}
    form = form_class(request.POST or None, user=request.user, instance=obj, initial=initial)
    saved = _save_valid(request, form)
    if saved:
        return redirect(obj_url(saved))
    return render(
        request, "portal/object_form.html", {"form": form, "obj": obj, "kind": model.kube.kind, "kind_slug": kind}
    )


@login_required
def model_yaml(request: HttpRequest, kind: str, pk: int | None = None) -> HttpResponse:
    """YAML mode: paste a manifest; every error is listed with its path."""
    model = _model(kind)
    obj = visible_object(request, model, pk, CHANGE) if pk else None
    _require_perm(request, model, "change" if obj else "add")
    form = ManifestForm(request.POST or None, user=request.user, model=model, instance=obj)
    saved = _save_valid(request, form)
    if saved:
        return redirect(obj_url(saved))
    return render(
        request, "portal/object_yaml.html", {"form": form, "obj": obj, "kind": model.kube.kind, "kind_slug": kind}
    )


def resolve_view(model: type[KubeObject]):
    return ResolveConflictView.as_view(model=model)
