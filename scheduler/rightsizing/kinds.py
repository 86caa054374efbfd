"""The serving kinds as right-sizing's pages and API reach them: by URL slug, through the registry.

Right-sizing imports no serving app. A kind is judged when it declares ``pod_label`` and
``pod_resources()`` (clusters/serving.py) and is reached at ``rightsizing/<url_slug>/`` (else its
plural); its recommendation can be applied when it names ``pod_memory_path`` and implements
``spec_with_pod_memory()``; a refresh writes its status when ``rightsizing_status`` is set (its
CRD's status has the fields of writeback.py and it projects ``observed_peak_bytes`` and
``utilization_percent``). Applying needs the kind's own change permission; refreshing is staff's
(:func:`may_refresh`).
"""

from __future__ import annotations

from typing import Any

from django.http import Http404

from accounts.public import is_unrestricted
from clusters.models import KubeObject
from clusters.web.services import object_removed
from scheduler.rightsizing.conf import serving_kinds

DEFAULT_SLUG = "inferencemodels"  # the kind of the first URLs, rightsizing/models/<pk>/...


def kind_for_slug(slug: str) -> type[KubeObject]:
    """The serving kind a URL names (its ``url_slug``, as on its own pages); 404 naming the known ones."""
    kinds = {_slug(model): model for model in serving_kinds()}
    if slug not in kinds:
        raise Http404(f"no kind {slug!r}; one of {', '.join(kinds)}")
    return kinds[slug]


def slug_of(kind: str) -> str:
    return next(_slug(model) for model in serving_kinds() if model.kube.kind == kind)


def _slug(model: type[KubeObject]) -> str:
    """The kind's ``url_slug``, else its plural (a kind that declares none)."""
    return getattr(model, "url_slug", model.kube.plural)


def refresh_permissions() -> list[str]:
    """A refresh writes the status of the kinds that carry right-sizing fields: their change rights."""
    return [model.permission("change") for model in serving_kinds() if getattr(model, "rightsizing_status", False)]


def may_refresh(user: Any) -> bool:
    """Whether ``user`` may refresh right-sizing (the API, the page's button and its POST alike).

    Staff only, with the change right of the kinds a refresh writes: a refresh queries a cluster's
    Prometheus and writes the right-sizing status of every serving object in the cluster, whichever
    team's, so a team member, who may change only their own namespaces, may not start one.
    """
    return is_unrestricted(user) and user.has_perms(refresh_permissions())


def applicable(model: type[KubeObject]) -> bool:
    """The kind declares its pods' memory in its spec, where apply can set it."""
    return getattr(model, "pod_memory_path", None) is not None


def apply_kinds(user: Any) -> set[str]:
    """The kinds whose recommendations ``user`` may apply (applicable, and the right to change them)."""
    kinds = filter(applicable, serving_kinds())
    return {model.kube.kind for model in kinds if user.has_perm(model.permission("change"))}


def _forget_history(kind: str, object_id: int, **_: Any) -> None:
    from scheduler.rightsizing.models import Observation

    Observation.objects.filter(kind=kind, object_id=object_id).delete()


def connect_history_deletion() -> None:
    """An object removed in the portal takes its observations with it, whatever its kind (what a
    foreign key's CASCADE did for InferenceModel alone); a deleted cluster's go through
    ``Observation.cluster``."""
    object_removed.connect(_forget_history, dispatch_uid="rightsizing-history")
