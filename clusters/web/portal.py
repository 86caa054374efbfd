"""Portal building blocks shared by every mirrored kind: forms with per-field errors, YAML mode,
the object page's sync/conflict/audit context and the conflict-resolution view.

Every write goes through :mod:`clusters.web.services` (audit, apply on commit) and every read through
``accounts.access.restrict``; validation is :func:`clusters.validation.manifests.validate_manifest`, the
single validator, whose error paths (``spec.memory``) decide which form field shows the error.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from django import forms
from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views import View

from accounts.public import ADD, CHANGE, DELETE, VIEW, can_act_in, restrict, visible_clusters
from clusters.models import AuditEntry, Cluster, KubeObject, SyncState, cluster_document
from clusters.sync.audit import Actor
from clusters.validation.manifests import ManifestInvalid, identity_errors, validate_manifest
from clusters.web.api.pagination import BoundedPaginator
from clusters.web.editor_schema import editor_schema
from clusters.web.forms import CopyVersionMixin, YAMLField, copy_version_field, to_yaml
from clusters.web.services import assign_manifest, request_delete, resolve_conflict, save_portal_edit
from clusters.web.yaml_review import Review, review

PORTAL = AuditEntry.Source.PORTAL


def non_empty(params: QueryDict) -> QueryDict:
    """The query without empty values: a filter form submits every field, and an empty choice is "any"."""
    cleaned = QueryDict(mutable=True)
    for key, values in params.lists():
        kept = [value for value in values if value != ""]
        if kept:
            cleaned.setlist(key, kept)
    return cleaned


def bad_request(request: HttpRequest, message: str) -> HttpResponse:
    """A 400 page in the portal's style naming the parameter, its value and the rule (the API's
    wording), with the way back to the unfiltered list."""
    return render(request, "portal/bad_request.html", {"message": message, "back": request.path}, status=400)


PAGE_SIZE = 25


def list_page(
    request: HttpRequest, filterset_class: type, queryset: Any, template: str, extra: Any = None
) -> HttpResponse:
    """A filtered, paginated list of one kind: the kind's FilterSet (the API's), a styled 400 naming
    the bad parameter, ``PAGE_SIZE`` rows a page, counted up to a bound and read ids first
    (BoundedPaginator). ``extra(page)`` adds context from the page's rows."""
    filterset = filterset_class(non_empty(request.GET), queryset=queryset)
    if not filterset.is_valid():
        field, errors = next(iter(filterset.errors.items()))
        return bad_request(request, f"{field}: {request.GET.get(field)!r} {errors[0]}")
    page = BoundedPaginator(filterset.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "page": page, "params": request.GET, "query": query.urlencode(),
        "clusters": Cluster.objects.values_list("name", flat=True), "sync_states": SyncState.choices,
    }  # fmt: skip
    return render(request, template, {**context, **(extra(page) if extra else {})})


def dig(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        if not isinstance(data.get(key), dict):
            data[key] = {}
        data = data[key]
    data[path[-1]] = value


def _drop(data: dict[str, Any], path: tuple[str, ...]) -> None:
    parent = dig(data, path[:-1]) if len(path) > 1 else data
    if isinstance(parent, dict):
        parent.pop(path[-1], None)


def in_order_of(value: Any, reference: Any) -> Any:
    """``value`` with its mappings' keys in ``reference``'s order (keys ``reference`` lacks last):
    a form puts the fields it edits back one by one, and saving unchanged must write the same text."""
    if isinstance(value, dict) and isinstance(reference, dict):
        ordered = {key: in_order_of(value[key], reference[key]) for key in reference if key in value}
        return ordered | {key: item for key, item in value.items() if key not in ordered}
    if isinstance(value, list) and isinstance(reference, list):
        return [in_order_of(item, reference[index]) if index < len(reference) else item
                for index, item in enumerate(value)]  # fmt: skip
    return value


def _path_under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((prefix + ".", prefix + "["))


def preselect_only_cluster(field: forms.ModelChoiceField, user: Any) -> None:
    """A create form whose user sees one cluster starts with it chosen (an edit shows its own)."""
    if field.initial is None:
        clusters = list(visible_clusters(user)[:2])
        if len(clusters) == 1:
            field.initial = clusters[0].name


class KubeObjectPageForm(CopyVersionMixin, forms.Form):
    """Create or edit one mirrored object with a field per common spec entry plus the rest as YAML.

    ``spec_fields`` maps form fields to spec paths. An error from the validator lands on the field
    whose path it names (``spec.memory`` -> ``memory``), else on ``more_spec``, else on top.
    Identity (cluster, namespace, name) is fixed once created, as in the cluster. The form
    rebuilds the whole spec from the page, so it carries the version it was opened on
    (:class:`clusters.web.forms.CopyVersionMixin`).
    """

    model: ClassVar[type[KubeObject]]
    spec_fields: ClassVar[dict[str, tuple[str, ...]]] = {}
    list_fields: ClassVar[tuple[str, ...]] = ()  # fields entered as comma-separated lists

    cluster = forms.ModelChoiceField(queryset=Cluster.objects.all(), to_field_name="name")
    namespace = forms.CharField(max_length=63, initial="default")
    name = forms.CharField(max_length=253)
    labels = YAMLField(help_text="As YAML, e.g. 'team: vision'.", widget=forms.Textarea(attrs={"rows": 3}))
    more_spec = YAMLField(label="More spec (YAML)", help_text="Any other spec fields, as YAML.")
    edit_version = copy_version_field()

    def __init__(self, *args: Any, user: Any, instance: KubeObject | None = None, **kwargs: Any) -> None:
        self.user, self.instance = user, instance
        if instance is not None:
            spec = copy.deepcopy(instance.spec or {})
            initial = {"cluster": instance.cluster.name, "namespace": instance.namespace, "name": instance.name}
            initial["labels"] = instance.labels
            for field, path in self.spec_fields.items():
                value = dig(spec, path)
                # A list is shown as its comma-separated items; an empty one as nothing (never "[]").
                initial[field] = ", ".join(value) if field in self.list_fields and isinstance(value, list) else value
                _drop(spec, path)
            initial["more_spec"] = spec
            kwargs["initial"] = {**initial, **kwargs.get("initial", {})}
        super().__init__(*args, **kwargs)
        self.open_copy(instance)
        preselect_only_cluster(self.fields["cluster"], user)
        # identity first, then the kind's own fields, the free-form YAML last
        self.order_fields(["cluster", "namespace", "name", *self.spec_fields, "labels", "more_spec"])
        if instance is not None:
            for field in ("cluster", "namespace", "name"):
                self.fields[field].disabled = True

    @classmethod
    def initial_from_query(cls, params: QueryDict) -> dict[str, str]:
        """A create form pre-filled from the query string (``?name=...&memory=16Gi``), as the
        calculator links to it: only the form's own fields, as text the user reviews before saving."""
        return {key: params[key] for key in params if key in cls.base_fields and key != cls.COPY_FIELD}

    def clean(self) -> dict[str, Any]:
        """Every error of the page at once: the fields', the team's and the name's, and the
        validator's on the spec (those landing on a field that already shows an error left out)."""
        data = super().clean()
        cluster, namespace, name = data.get("cluster"), data.get("namespace"), data.get("name")
        if cluster is not None and namespace and not can_act_in(self.user, cluster.pk, namespace,
                                                                CHANGE if self.instance else ADD):  # fmt: skip
            self.add_error(
                "namespace", f"{namespace!r} in cluster {cluster.name} is not a namespace your teams may edit"
            )
        if self.instance is None and cluster is not None and name and namespace:
            for error in identity_errors(self.model, cluster, {"name": name, "namespace": namespace})[:1]:
                self.add_error("name", error.message)
        if self.has_error("more_spec") or self.has_error("labels"):
            return data  # unreadable YAML: the spec's other errors would be guesses
        spec = copy.deepcopy(data.get("more_spec") or {})
        for field, path in self.spec_fields.items():
            value = data.get(field)
            if field in self.list_fields:
                value = [item.strip() for item in (value or "").split(",") if item.strip()]
            if value not in (None, "", []):
                _put(spec, path, value)
            else:
                _drop(spec, path)
        metadata = {key: value for key, value in (("name", name), ("namespace", namespace)) if value}
        metadata["labels"] = data.get("labels") or {}
        if self.instance is not None and self.instance.annotations:
            metadata["annotations"] = self.instance.annotations
        manifest = {"apiVersion": self.model.kube.api_version, "kind": self.model.kube.kind, "metadata": metadata}
        try:
            validated = validate_manifest(self.model, {**manifest, "spec": spec}, cluster)
        except ManifestInvalid as invalid:
            for error in invalid.errors:
                field = self.field_for(error.path)
                if field is None or not self.has_error(field):
                    self.add_error(field, error.message)
            return data
        if self.errors:
            return data
        self.manifest = validated
        if self.instance is not None:  # the fields were put back one by one, and defaults filled in last
            self.manifest["spec"] = in_order_of(self.manifest["spec"], self.instance.spec or {})
        self.check_copy(self.instance, data.get(self.COPY_FIELD, ""), cluster_document(self.manifest))
        return data

    def field_for(self, path: str) -> str | None:
        """The form field that shows an error at manifest ``path``."""
        for field, spec_path in self.spec_fields.items():
            if _path_under(path, "spec." + ".".join(spec_path)):
                return field
        for field in ("name", "namespace", "labels"):
            if _path_under(path, f"metadata.{field}"):
                return field
        return "more_spec" if _path_under(path, "spec") else None

    def save(self, actor: Actor) -> KubeObject:
        obj = self.instance or self.model(cluster=self.cleaned_data["cluster"])
        assign_manifest(obj, self.manifest)
        return save_portal_edit(obj, actor, made_from=self.cleaned_data[self.COPY_FIELD] if self.instance else None)


class ManifestForm(CopyVersionMixin, forms.Form):
    """YAML mode: one manifest pasted as ``kubectl get -o yaml`` prints it; errors listed with their paths.

    The version the page was opened on travels in a hidden field, not in the YAML. A pasted
    manifest that names ``metadata.resourceVersion`` was made from that version instead.
    """

    cluster = forms.ModelChoiceField(queryset=Cluster.objects.all(), to_field_name="name")
    # data-yaml-editor: the page's CRD schema element; the editor (static/editor) upgrades the textarea
    manifest = YAMLField(required=True, widget=forms.Textarea(
        attrs={"rows": 24, "cols": 100, "class": "code", "data-yaml-editor": "crd-schema"}))
    edit_version = copy_version_field()

    def __init__(self, *args: Any, user: Any, model: type[KubeObject], instance: KubeObject | None = None, **kw):
        self.user, self.model, self.instance = user, model, instance
        if instance is not None:
            manifest = instance.to_manifest()
            manifest.pop("status", None)
            manifest["metadata"].pop("resourceVersion")
            kw["initial"] = {"cluster": instance.cluster.name, "manifest": to_yaml(manifest)}
        super().__init__(*args, **kw)
        self.open_copy(instance)
        preselect_only_cluster(self.fields["cluster"], user)
        if instance is not None:
            self.fields["cluster"].disabled = True

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        try:
            manifest = validate_manifest(self.model, data["manifest"], data["cluster"])
        except ManifestInvalid as invalid:
            for error in invalid.errors:
                self.add_error(None, error.message)
            return data
        metadata, cluster = manifest["metadata"], data["cluster"]
        if self.instance is None and not can_act_in(self.user, cluster.pk, metadata["namespace"], ADD):
            self.add_error(
                None,
                f"metadata.namespace: {metadata['namespace']!r} in cluster {cluster.name} "
                "is not a namespace your teams may create in",
            )
            return data
        taken = identity_errors(self.model, cluster, metadata, self.instance)
        for error in taken:
            self.add_error(None, error.message)
        if taken:
            return data
        self.made_from = metadata.get("resourceVersion") or data.get(self.COPY_FIELD, "")
        self.check_copy(self.instance, self.made_from, cluster_document(manifest))
        self.validated = manifest
        return data

    def save(self, actor: Actor) -> KubeObject:
        obj = self.instance or self.model(cluster=self.cleaned_data["cluster"])
        assign_manifest(obj, self.validated)
        return save_portal_edit(obj, actor, made_from=self.made_from if self.instance else None)


def visible_object(request: HttpRequest, model: type[KubeObject], pk: int, action: str = VIEW) -> KubeObject:
    """The object if the user may ``action`` it, else 404 (never says whether it exists)."""
    return get_object_or_404(restrict(model.objects.select_related("cluster"), request.user, action), pk=pk)


def may(request: HttpRequest, obj: KubeObject, action: str) -> bool:
    """The user holds the kind's permission for ``action`` and a team grant over the object's namespace."""
    return (
        request.user.has_perm(obj.permission(action))
        and restrict(type(obj).objects.filter(pk=obj.pk), request.user, action).exists()
    )


def require_perm(request: HttpRequest, model: type[KubeObject], action: str) -> None:
    """403 naming the Django permission the user lacks for ``action`` on the kind."""
    needed = model.permission(action)
    if not request.user.has_perm(needed):
        raise PermissionDenied(f"you need {needed}")


def object_context(request: HttpRequest, obj: KubeObject) -> dict[str, Any]:
    """What every object page shows: spec and status as YAML, conditions, sync state, conflict, audit."""
    status = obj.status or {}
    conflict = obj.conflict if obj.sync_state == SyncState.CONFLICT else None
    model = type(obj)
    can_change = may(request, obj, CHANGE) and obj.sync_state != SyncState.DELETING
    return {
        "obj": obj,
        "kind": model.kube.kind,
        "spec_yaml": to_yaml(obj.spec),
        "status_yaml": to_yaml({k: v for k, v in status.items() if k != "conditions"}),
        "conditions": status.get("conditions") if isinstance(status.get("conditions"), list) else [],
        "conflict": conflict,
        "audit": AuditEntry.objects.filter(kind=model.kube.kind, object_id=obj.pk).select_related("actor")[:50],
        "can_change": can_change,
        "can_delete": may(request, obj, DELETE) and obj.sync_state != SyncState.DELETING,
        "delete_url": reverse(f"{model._meta.model_name}-delete-page", args=[obj.pk]),
        "resolve_url_name": f"{model._meta.model_name}-resolve-page",
        "live_url": reverse("live-objects", args=[model._meta.model_name, obj.pk]),
    }


def save_valid(request: HttpRequest, form: KubeObjectPageForm | ManifestForm) -> KubeObject | None:
    """Validate and save a posted form in one transaction: its version check locks the row until saved."""
    if request.method != "POST":
        return None
    with transaction.atomic():
        return form.save(Actor.from_request(request, PORTAL)) if form.is_valid() else None


def mode_urls(prefix: str, pk: int | None, *args: Any) -> dict[str, str]:
    """The form and YAML modes of one create or edit (``<prefix>-edit``, ``<prefix>-edit-yaml``,
    ``<prefix>-create``, ``<prefix>-create-yaml``), each page linking to the other."""
    if pk:
        return {"form_url": reverse(f"{prefix}-edit", args=[*args, pk]),
                "yaml_url": reverse(f"{prefix}-edit-yaml", args=[*args, pk])}  # fmt: skip
    return {"form_url": reverse(f"{prefix}-create", args=args), "yaml_url": reverse(f"{prefix}-create-yaml", args=args)}


def edit_page(
    request: HttpRequest, model: type[KubeObject], pk: int | None, make_form: Any, template: str, **context: Any
) -> HttpResponse:
    """Create (no pk) or edit one object with ``make_form(obj)``: permission and team checked, saved
    through :func:`save_valid`, then the object's page; else the form again with its errors."""
    obj = visible_object(request, model, pk, CHANGE) if pk else None
    require_perm(request, model, "change" if obj else "add")
    form = make_form(obj)
    context = {"form": form, "obj": obj, "kind": model.kube.kind, **context}
    if isinstance(form, ManifestForm):  # YAML mode: the editor completes the CRD's fields
        context["crd_schema"] = editor_schema(model.kube)
        if request.method == "POST" and request.POST.get("action") == "review":
            context["review"] = review_manifest(form, obj)
            return render(request, template, context)
    saved = save_valid(request, form)
    if saved:
        return redirect(obj_url(saved))
    return render(request, template, context)


def review_manifest(form: ManifestForm, obj: KubeObject | None) -> Review | None:
    """The "review changes" step: validate (the version check locks the row only while it runs),
    then the field changes and the cluster's dry run; None when the form has errors to show."""
    with transaction.atomic():
        if not form.is_valid():
            return None
    return review(form.cleaned_data["cluster"], obj, form.validated)


class DeleteObjectView(LoginRequiredMixin, View):
    """GET: a confirmation page naming the object and what deleting it does. POST: delete.

    An object the cluster has is marked ``Deleting`` and deleted there (clusters.web.services.request_delete);
    the row keeps showing Deleting until the cluster's finalizers are gone and the watcher sees it
    go. Needs the kind's delete permission and a team grant over the namespace (else 403 / 404).
    """

    model: type[KubeObject] | None = None
    list_url_name = ""

    def _object(self, request: HttpRequest, pk: int) -> KubeObject:
        obj = visible_object(request, self.model, pk, DELETE)
        require_perm(request, self.model, "delete")
        return obj

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        obj = self._object(request, pk)
        context = {"obj": obj, "kind": self.model.kube.kind, "object_url": obj_url(obj),
                   "in_cluster": bool(obj.uid) and obj.cluster.auth_method != Cluster.AuthMethod.SNAPSHOT}  # fmt: skip
        return render(request, "portal/object_delete.html", context)

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        obj = self._object(request, pk)
        label = f"{self.model.kube.kind} {obj.namespace}/{obj.name}"
        if request_delete(obj, Actor.from_request(request, PORTAL)):
            messages.success(request, f"{label} deleted.")
        else:
            messages.success(
                request, f"{label} is being deleted in cluster {obj.cluster.name}: it shows Deleting until the "
                "cluster's finalizers let it go."
            )  # fmt: skip
        return redirect(self.list_url_name)


class ResolveConflictView(LoginRequiredMixin, View):
    """POST take=portal|cluster: settle a Conflict through clusters.web.services.resolve_conflict."""

    model: type[KubeObject] | None = None
    http_method_names = ["post"]

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        obj = visible_object(request, self.model, pk, CHANGE)
        require_perm(request, self.model, "change")
        try:
            resolve_conflict(obj, request.POST.get("take", ""), Actor.from_request(request, PORTAL))
        except ManifestInvalid as invalid:
            messages.error(request, "; ".join(error.message for error in invalid.errors))
        else:
            messages.success(request, f"Conflict resolved: took the {request.POST['take']}'s values.")
        return redirect(obj_url(obj))


def obj_url(obj: KubeObject) -> str:
    """Each kind names its page ``<model_name>-detail-page``."""
    return reverse(f"{obj._meta.model_name}-detail-page", args=[obj.pk])
