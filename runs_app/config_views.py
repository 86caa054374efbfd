"""InferenceConfig pages: list, detail (with the runs that use it), create and edit (form or YAML).

Runs need a config, so a team creates and adjusts its own here instead of asking platform staff
for the admin. Access, validation and writes are the shared ones of clusters.web.portal.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.public import VIEW, restrict
from clusters.web.portal import ManifestForm, edit_page, list_page, mode_urls, object_context, visible_object
from runs_app.filtersets import InferenceConfigFilterSet
from runs_app.forms import InferenceConfigPageForm
from runs_app.models import InferenceConfig, InferenceRun


@login_required
def config_list(request: HttpRequest) -> HttpResponse:
    configs = restrict(InferenceConfig.objects.select_related("cluster"), request.user, VIEW)
    return list_page(request, InferenceConfigFilterSet, configs, "runs_app/config_list.html")


@login_required
def config_page(request: HttpRequest, pk: int) -> HttpResponse:
    config = visible_object(request, InferenceConfig, pk)
    runs = InferenceRun.objects.filter(
        cluster=config.cluster, config_namespace=config.namespace, config_name=config.name
    ).order_by("-created_at")
    context = object_context(request, config)
    context["runs"] = restrict(runs, request.user, VIEW)[:20]
    context["can_run"] = request.user.has_perm("runs_app.add_inferencerun")
    return render(request, "runs_app/config.html", context)


@login_required
def config_form(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    """Create (no pk; ``?model_name=`` pre-fills the KServe model) or edit one config."""
    initial = {"model_name": request.GET.get("model_name", "")} if pk is None else {}
    return edit_page(
        request, InferenceConfig, pk,
        lambda obj: InferenceConfigPageForm(request.POST or None, user=request.user, instance=obj, initial=initial),
        "portal/object_form.html", **mode_urls("config", pk),
    )  # fmt: skip


@login_required
def config_yaml(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    return edit_page(
        request, InferenceConfig, pk,
        lambda obj: ManifestForm(request.POST or None, user=request.user, model=InferenceConfig, instance=obj),
        "portal/object_yaml.html", **mode_urls("config", pk),
    )  # fmt: skip
