"""The live part of an object page: its workloads, pods and events (htmx fragment, refreshed while
the page is open) and one pod's log (tail, then followed by polling). Both answer 404 for an
object the user's teams may not see, as the object page does."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from clusters.kinds import all_models
from clusters.kube.live import live_objects, pod_log
from clusters.models import KubeObject
from clusters.web.portal import obj_url, visible_object

DEFAULT_TAIL = 200
MAX_TAIL = 5000


def _visible(request: HttpRequest, model_name: str, pk: int) -> KubeObject:
    model = next((m for m in all_models() if m._meta.model_name == model_name), None)
    if model is None:
        raise Http404(f"no mirrored kind {model_name!r}")
    return visible_object(request, model, pk)


def _fragment(request: HttpRequest) -> bool:
    """htmx asks for the fragment; a browser without JavaScript follows the link to a whole page."""
    return request.headers.get("HX-Request") == "true"


@login_required
def live_panel(request: HttpRequest, model_name: str, pk: int) -> HttpResponse:
    obj = _visible(request, model_name, pk)
    context = {"obj": obj, "live": live_objects(obj), "logs_url": reverse("live-logs", args=[model_name, pk]),
               "obj_url": obj_url(obj), "fragment": _fragment(request)}
    return render(request, "portal/_live_objects.html" if context["fragment"] else "portal/live_page.html", context)


def _tail(value: str | None) -> int:
    try:
        return min(max(int(value or DEFAULT_TAIL), 1), MAX_TAIL)
    except ValueError:
        return DEFAULT_TAIL


@login_required
def live_logs(request: HttpRequest, model_name: str, pk: int) -> HttpResponse:
    obj = _visible(request, model_name, pk)
    pod, container = request.GET.get("pod", ""), request.GET.get("container", "")
    tail = _tail(request.GET.get("tail"))
    try:
        text, error = pod_log(obj, pod, container, tail)
    except LookupError as refused:
        raise Http404(str(refused)) from None
    context = {"obj": obj, "pod": pod, "container": container, "tail": tail, "text": text, "error": error,
               "follow": request.GET.get("follow") == "1", "logs_url": reverse("live-logs", args=[model_name, pk]),
               "obj_url": obj_url(obj), "fragment": _fragment(request)}
    return render(request, "portal/_pod_log.html" if context["fragment"] else "portal/pod_log_page.html", context)
