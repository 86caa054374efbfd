"""Admin for platform staff: clusters, and a base for every mirrored kind."""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Hashable, Sequence
from functools import cache, partial
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.views.main import ChangeList
from django.db import connection, models
from django.db.models import QuerySet
from django.db.models.functions import Length
from django.template.loader import render_to_string
from django.utils import translation
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

from clusters.controller_registry import controllable_kinds
from clusters.kube.connection import check_connection
from clusters.models import AuditEntry, Cluster, KubeObject, SyncState
from clusters.postgres_only import LONGEST_INDEXED_TEXT
from clusters.sync.audit import Actor
from clusters.sync.tasks import resync_cluster_task
from clusters.validation.metadata_rules import DNS1123_LABEL
from clusters.web.admin_quantities import QuantityAdminMixin
from clusters.web.api.pagination import (
    CLUSTER_ORDER,
    CLUSTER_ORDER_DESCENDING,
    BoundedPaginator,
    IdsInOrder,
    ids_by_text_column,
)
from clusters.web.connection_rules import connection_change_errors
from clusters.web.forms import KubeObjectForm, to_yaml
from clusters.web.list_costs import distinct_values
from clusters.web.services import Resolution, request_delete, resolve_conflict, save_portal_edit
from common.lru import LeastRecentlyUsed


@cache
def _selection_label(language: str | None) -> str:
    """Django's row checkbox label in ``language``, translated once: ``gettext`` for every row was a
    third of the checkbox's time."""
    with translation.override(language):
        return _("Select this object for an action - {}")


_KEPT_WIDGETS = 256  # rendered widgets kept: a few admins' action forms x languages x selected actions
_widget_html: LeastRecentlyUsed[Hashable, SafeString] = LeastRecentlyUsed(_KEPT_WIDGETS)
_PLAIN = (str, int, bool, type(None))  # values whose equality means the same HTML


class RenderedOnce(forms.Widget):
    """A widget rendered once per distinct input, its HTML kept: the changelist's action form (the
    action's ``<select>`` and the hidden select-across input) went through five form templates on
    every page for the same few strings (0.5-0.9 ms of a 20 ms page). The HTML is a pure function of
    what the key holds (the widget's class, attributes, choices as text, name, value, whether it is
    required, the renderer and the language), so nothing is invalidated: another choice, label or
    selected value is another key. Inputs that are not plain text, numbers or flags (an optgroup, a
    list of values) are rendered every time."""

    def render(self, name: str, value: Any, attrs: dict | None = None, renderer: Any = None) -> SafeString:
        key = self._input(name, value, attrs, renderer)
        kept = None if key is None else _widget_html.get(key)
        if kept is None:
            kept = super().render(name, value, attrs, renderer)
            if key is not None:
                _widget_html.put(key, kept)
        return kept

    def _input(self, name: str, value: Any, attrs: dict | None, renderer: Any) -> Hashable | None:
        """Everything the HTML depends on, as a key; None where a part is not plain."""
        given = (*self.attrs.items(), *(attrs or {}).items())
        choices = list(getattr(self, "choices", ()))
        parts = [name, value, *(part for pair in given for part in pair), *(option for option, _ in choices)]
        grouped = any(isinstance(label, list | tuple) for _, label in choices)  # an optgroup
        if grouped or not all(isinstance(part, _PLAIN) for part in parts):
            return None
        choices = [(option, str(label)) for option, label in choices]
        language = translation.get_language()
        return type(self), name, value, tuple(given), tuple(choices), self.is_required, renderer, language


@cache
def rendered_once(widget: type[forms.Widget]) -> type[forms.Widget]:
    """``widget``'s class with its HTML kept (:class:`RenderedOnce`)."""
    return type(f"RenderedOnce{widget.__name__}", (RenderedOnce, widget), {})


class KeptActionForm(helpers.ActionForm):
    """Django's action form (the changelist's action ``<select>`` and select-across input) with its
    widgets' HTML kept (:class:`RenderedOnce`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.widget.__class__ = rendered_once(type(field.widget))


def _value(field: dict, side: str) -> str:
    return json.dumps(field[side]) if field.get(f"{side}_set", True) else "(not set)"


def _yaml_block(value) -> str:
    return format_html('<pre style="margin:0">{}</pre>', to_yaml(value) or "—")


class NamespaceListField(forms.CharField):
    """Namespaces one per line (commas and spaces also separate), cleaned to a list of names;
    each bad one is named with the rule it breaks."""

    widget = forms.Textarea(attrs={"rows": 4, "cols": 40, "placeholder": "one namespace per line"})

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value) -> list[str]:
        if isinstance(value, list):
            return value
        names = list(dict.fromkeys((value or "").replace(",", " ").split()))
        bad = [name for name in names if len(name) > 63 or not DNS1123_LABEL.fullmatch(name)]
        if bad:
            raise forms.ValidationError(
                f"{', '.join(map(repr, bad))}: a namespace name is at most 63 lowercase letters, digits and '-', "
                "starting and ending with a letter or digit"
            )
        return names


class ClusterForm(forms.ModelForm):
    """Credentials are write-only: never rendered back; an empty submit keeps the stored one, unless
    the URL it is sent to changed (then it must be given again). Namespaces are lines of text and
    managed kinds checkboxes, never JSON to type."""

    namespaces = NamespaceListField(
        required=False, help_text="Namespaces to sync, one per line; empty means all namespaces."
    )
    managed_kinds = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        choices=lambda: [(kind, kind) for kind in controllable_kinds()],
        help_text="Kinds the portal acts as the controller for in this cluster; leave unchecked where another "
        "controller acts on them (never both).",
    )

    prometheus_auth_header = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Never shown once saved; leave empty to keep the current header.",
    )
    bearer_token = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Never shown once saved; leave empty to keep the current token.",
    )

    class Meta:
        model = Cluster
        fields = [
            "name",
            "description",
            "auth_method",
            "server_url",
            "kubeconfig_path",
            "kubeconfig_context",
            "bearer_token",
            "ca_cert",
            "insecure_skip_tls_verify",
            "allow_insecure_http",
            "impersonate_users",
            "namespaces",
            "request_timeout_seconds",
            "managed_kinds",
            "prometheus_url",
            "prometheus_auth_header",
        ]

    user = None  # the person editing, set by ClusterAdmin.get_form

    def clean(self) -> dict:
        """Put the stored credentials back before the model's checks run, so they see what is saved."""
        data = super().clean()
        stored = Cluster.objects.get(pk=self.instance.pk) if self.instance.pk else None
        candidate = Cluster(**{field: data.get(field) for field in self.Meta.fields if field in data})
        supplied = {name for name in Cluster.CREDENTIAL_FOR_URL.values() if data.get(name)}
        refused = connection_change_errors(self.user, stored, candidate, supplied)
        if stored is None:
            self._add_errors(refused)
            return data
        for name in Cluster.CREDENTIAL_FOR_URL.values():
            if name not in supplied:
                data[name] = getattr(stored, name)
        candidate = Cluster(**{field: data.get(field, getattr(stored, field)) for field in Cluster.CREDENTIAL_FOR_URL})
        self._add_errors(candidate.moved_credential_errors(stored, supplied))
        self._add_errors(refused)
        return data

    def _add_errors(self, errors: dict[str, str]) -> None:
        """One message per field: the first rule a field breaks is the one shown."""
        for name, message in errors.items():
            if name in self.fields and name not in self.errors:
                self.add_error(name, message)


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    form = ClusterForm
    list_display = ["name", "auth_method", "server_url", "healthy", "last_full_resync_at"]
    list_filter = ["auth_method", "healthy"]
    search_fields = ["name", "description", "server_url"]
    readonly_fields = ["healthy", "last_error", "missing_kinds", "last_full_resync_at", "created_at", "updated_at"]
    actions = ["sync_now", "test_connection"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        """The form knows who edits: connection settings are staff's (clusters/connection_rules.py)."""
        form = super().get_form(request, obj, change=change, **kwargs)
        form.user = request.user
        return form

    @admin.action(description="Sync now: read every mirrored object from the selected clusters again")
    def sync_now(self, request, queryset):
        snapshots = [cluster.name for cluster in queryset if cluster.auth_method == Cluster.AuthMethod.SNAPSHOT]
        started = [cluster for cluster in queryset if cluster.name not in snapshots]
        for cluster in started:
            resync_cluster_task.delay(cluster.pk)
        if started:
            self.message_user(
                request,
                f"Sync started for {', '.join(c.name for c in started)}: the Healthy and Last full resync columns "
                "show the outcome (reload the list).",
                messages.SUCCESS,
            )
        if snapshots:
            self.message_user(
                request, f"Not synced: {', '.join(snapshots)} (snapshots have no API server).", messages.WARNING
            )

    @admin.action(description="Test connection: reach the API server and list each mirrored kind")
    def test_connection(self, request, queryset):
        for cluster in queryset:
            report = check_connection(cluster)
            self.message_user(request, report.summary(), messages.SUCCESS if report.ok else messages.ERROR)


def _as_shown(field: str) -> str:
    """A derived byte column is shown as a quantity (``80Gi``), through QuantityAdminMixin."""
    return f"{field}_quantity" if field.endswith("_bytes") else field


class ClusterFilter(admin.RelatedFieldListFilter):
    """The cluster filter's choices read as names: Django's read every column of every cluster,
    decrypting each one's credentials, to list their names on every changelist page."""

    def field_choices(
        self, field: models.ForeignKey, request: Any, model_admin: admin.ModelAdmin
    ) -> list[tuple[Any, str]]:
        clusters = field.related_model._default_manager.complex_filter(field.get_limit_choices_to()).only("name")
        ordering = self.field_admin_ordering(field, request, model_admin)
        return [(cluster.pk, str(cluster)) for cluster in (clusters.order_by(*ordering) if ordering else clusters)]


class IndexedValuesFilter(admin.AllValuesFieldListFilter):
    """The choices of a column's filter, read by walking its B-tree (one descent per distinct value,
    clusters.web.list_costs.distinct_values) instead of ``SELECT DISTINCT`` over every row on every
    load (300-400 ms for the pool at 100,000 rows). It reads the table as it is now, so a value
    appears or goes as rows change, with nothing to invalidate. The column needs an index that
    starts with it (models_app migrations 0003 and 0010)."""

    def __init__(self, field, request, params, model, model_admin, field_path) -> None:
        super().__init__(field, request, params, model, model_admin, field_path)  # its DISTINCT stays unread
        longest = LONGEST_INDEXED_TEXT if isinstance(field, models.TextField) else None
        self.lookup_choices = distinct_values(model, field.name, longest, blank=True)  # "" first, if a row has it
        self.longest = longest

    def expected_parameters(self) -> list[str]:
        """``column__exact`` too (the form older links and the benchmarks use), so it is this
        filter's to apply rather than left to the changelist as a bare lookup."""
        return [*super().expected_parameters(), f"{self.lookup_kwarg}__exact"]

    def queryset(self, request, queryset):
        """The rows with the chosen value; for a text column also ``length(column) <= longest`` where
        the value is that short (true of every matching row), so PostgreSQL may use the partial
        indexes that hold only such values (models_app migration 0011)."""
        queryset = super().queryset(request, queryset)
        chosen = [
            value
            for key in (self.lookup_kwarg, f"{self.lookup_kwarg}__exact")
            for value in _as_list(self.used_parameters.get(key))
        ]
        if self.longest and chosen and all(len(str(value)) <= self.longest for value in chosen):
            length = f"{self.field_path}_length"
            queryset = queryset.alias(**{length: Length(self.field_path)}).filter(**{f"{length}__lte": self.longest})
        return queryset


def _as_list(value: object) -> list:
    return [] if value is None else list(value) if isinstance(value, list | tuple) else [value]


class NarrowChangeList(ChangeList):
    """A mirrored kind's changelist page read with only the columns its list shows (:func:`listed_columns`):
    not the JSON columns (spec, status, labels..., the pods' shapes), decoded for every row (a page
    of 100 rows read about 150 KB of manifests for nothing), nor the other scalar columns
    converted and set on every instance (0.9 ms of a page's 21 ms of CPU), nor of the cluster
    anything but its name (the cluster column), its two credentials among them, decrypted for every
    row. Only the page's rows: actions still get whole rows (``get_queryset``). Its filters'
    choices are written in one step, and its links' query strings are encoded once per parameter."""

    def get_results(self, request: Any) -> None:
        self.queryset = self.queryset.only(*listed_columns(self.model_admin, self.list_display))
        super().get_results(request)

    def get_query_string(self, new_params: dict | None = None, remove: list | None = None) -> str:
        """Django's query string (the same text: its parameters sorted, each encoded by Django's
        ``urlencode``), each parameter encoded once per page: a page asks for 160 of them (a link per
        filter choice and per sort), nearly all repeating the page's own parameters, and encoding
        them every time was a twentieth of its CPU."""
        params = self.filter_params.copy()
        for prefix in remove or ():
            for key in [key for key in params if key.startswith(prefix)]:
                del params[key]
        for key, value in (new_params or {}).items():
            if value is None:
                params.pop(key, None)
            else:
                params[key] = value
        return "?" + "&".join([part for part in map(self._encoded, sorted(params.items())) if part])

    def _encoded(self, param: tuple[str, Any]) -> str:
        """``key=value`` as ``urlencode([param], doseq=True)`` writes it (a list as one ``key=item`` per
        item, "" for none), kept for the page where the value is text or numbers, or a list of them
        (the page's own parameters: Django keeps each as the list of its values)."""
        name, value = param
        values = value if isinstance(value, list | tuple) else (value,)
        if not all(type(item) in (str, int) for item in values):
            return urlencode([param], doseq=True)
        key = (name, type(value), tuple((type(item), item) for item in values))  # True == 1, but is "True"
        kept = self.__dict__.setdefault("_encoded_params", {})
        if key not in kept:
            kept[key] = urlencode([param], doseq=True)
        return kept[key]

    def _get_deterministic_ordering(self, ordering: list[Any]) -> list[Any]:
        """A column's sort (:func:`column_order`) where one column is sorted; Django's own (its
        ``-pk`` last) for a sort by several, which no index holds."""
        if len(ordering) == 1 and isinstance(ordering[0], str) and ordering[0].lstrip("-") not in ("pk", "id"):
            return column_order(self.model, ordering[0])
        return super()._get_deterministic_ordering(ordering)

    def get_filters(self, request: Any) -> tuple[list[admin.ListFilter], bool, dict, bool, bool]:
        """Django's filters, each written by ``admin/kube_object_filter.html`` (its choices in one
        step, clusters/templatetags/admin_filters.py) where it would be by Django's ``filter.html``."""
        filters = super().get_filters(request)
        for spec in filters[0]:
            if spec.template == "admin/filter.html":
                spec.template = "admin/kube_object_filter.html"
        return filters


def column_order(model: type[KubeObject], term: str) -> list[Any]:
    """The changelist's order for ``term`` (a column, ``-`` first when descending), made total by
    the catalog's tie-breakers, namespace, name and id, in the column's direction, instead of
    Django's ``-pk``: the sort indexes are ``(column, namespace, name, id)`` (clusters.postgres_only
    ``sort_indexes``), so a page, the last one too, is read in index order; with ``-pk`` after the
    column no index held the order and every row was sorted (0.3-1.3 s of PostgreSQL at 100,000
    rows, issue 41). Where no index of the kind's table holds every row in that order (a text
    column, a kept key), the page's ids are read elsewhere (:meth:`KubeObjectAdmin.ids_in_order`).
    By cluster it is the mirrored kinds' default order, either way, walked cluster by cluster
    (pagination.ids_in_cluster_order)."""
    column, sign = term.lstrip("-"), "-" if term.startswith("-") else ""
    if column == "cluster":
        return list(CLUSTER_ORDER_DESCENDING if sign else CLUSTER_ORDER)
    return [term, *(f"{sign}{tie}" for tie in ("namespace", "name", "id") if tie != column)]


def listed_columns(model_admin: admin.ModelAdmin, list_display: Sequence[Any]) -> list[str]:
    """The columns of a mirrored kind's changelist page showing ``list_display``: each field column
    (the cluster's name for the cluster column), what a row's label reads (``label_columns``, the
    row checkbox's), and for a column of the admin's the field it is sorted by
    (``admin_order_field``), which is the one it shows (``<field>_quantity``, desired replicas). A
    column that reads another would be loaded row by row, a query each (tests/portal/
    test_admin_lists.py refuses any such load on every mirrored kind's page)."""
    model = model_admin.model
    fields = {field.name for field in model._meta.concrete_fields}
    columns = ["pk", *model_admin.label_columns]
    for name in list_display:
        if not isinstance(name, str):
            name = getattr(name, "admin_order_field", None)
        elif name not in fields:
            name = getattr(getattr(model_admin, name, None), "admin_order_field", None)
        if isinstance(name, str) and name.lstrip("-") in fields:
            columns.append(name.lstrip("-"))
    if "cluster" in columns:
        columns.append("cluster__name")
    return list(dict.fromkeys(columns))


class KubeObjectAdmin(QuantityAdminMixin, admin.ModelAdmin):
    """Base admin for mirrored kinds: sync fields read-only, spec and status shown as YAML."""

    form = KubeObjectForm
    action_form = KeptActionForm
    kind_list_display: tuple[str, ...] = ()
    kind_list_filter: tuple[str, ...] = ()
    list_select_related = ["cluster"]
    search_fields = ["name", "namespace"]
    actions = ["resolve_take_portal", "resolve_take_cluster"]
    paginator = BoundedPaginator
    change_list_template = "admin/kube_object_change_list.html"  # rows by clusters.web.admin_rows
    show_full_result_count = False  # a second count, of every row, on each filtered page
    show_facets = admin.ShowFacets.NEVER  # a count per choice over every matching row
    indexed_filters: tuple[str, ...] = ()  # list filters whose choices come from an index (IndexedValuesFilter)
    label_columns: tuple[str, ...] = ("namespace", "name")  # what a row's ``str()`` reads (KubeObject.__str__)
    sync_fields = (
        "sync_state",
        "last_error",
        "uid",
        "resource_version",
        "generation",
        "observed_generation",
        "cluster_created_at",
        "created_at",
        "updated_at",
    )

    # List columns offered unsorted: no index holds their order. Every write moves ``updated_at``
    # (the watcher's status reports included): an index on it would make each of them a non-HOT
    # update, written anew into every index of the table (clusters.postgres_only.room_for_updates).
    unsorted_columns: tuple[str, ...] = ("updated_at",)
    # List columns whose order a table apart holds, as their index in the kind's own table would
    # make every status report a non-HOT update: column -> the ids of a list's rows in
    # ``column_order``, given the list's queryset and the sign of the sort ("" or "-"). PostgreSQL
    # only (its triggers keep those tables; elsewhere the kind's own table is sorted).
    kept_orders: dict[str, Callable[[QuerySet, str], QuerySet]] = {}

    def get_list_display(self, request):
        return ["name", "namespace", "cluster", *self.kind_list_display, "sync_state", "updated_at"]

    def get_sortable_by(self, request: Any) -> list[str]:
        """The list's columns but ``unsorted_columns``: every sort offered reads an index (issue 41:
        each filter and sort bounded at 100,000 rows)."""
        return [column for column in self.get_list_display(request) if column not in self.unsorted_columns]

    def get_paginator(self, request: Any, queryset: QuerySet, per_page: int, *args: Any, **kwargs: Any) -> Any:
        """Django's paginator (``BoundedPaginator``), reading a page's ids where an index holds the
        sorted column's order when no index of the kind's table holds every row in it: a column of
        ``kept_orders`` from its table apart, a text column from its short values' index (on
        PostgreSQL, :meth:`ids_in_order`)."""
        paginator = super().get_paginator(request, queryset, per_page, *args, **kwargs)
        paginator.ids_in_order = self.ids_in_order(queryset)
        return paginator

    def ids_in_order(self, queryset: QuerySet) -> IdsInOrder | None:
        """Where the page's ids of ``queryset`` are read when it is sorted by one column whose own
        index does not hold every row (:meth:`get_paginator`); None: by its own ORDER BY."""
        order = list(queryset.query.order_by)
        first = order[0] if order and isinstance(order[0], str) else ""
        column, sign = first.lstrip("-"), "-" if first.startswith("-") else ""
        if connection.vendor != "postgresql" or not column or order != column_order(self.model, first):
            return None
        if column in self.kept_orders:
            kept = self.kept_orders[column]
            return lambda rows, offset, limit: list(kept(rows, sign)[offset : offset + limit])
        field = next((field for field in self.model._meta.concrete_fields if field.name == column), None)
        if isinstance(field, models.TextField):
            return partial(ids_by_text_column, column=column)
        return None

    def get_changelist(self, request: Any, **kwargs: Any) -> type[ChangeList]:
        return NarrowChangeList

    def action_checkbox(self, obj: KubeObject) -> str:
        """Django's own checkbox, written out: rendering it through the form widget's template took
        about a third of a 100-row changelist's time at 100,000 rows (docs/serving.md), and two
        ``format_html`` calls a row still 20 us, Django's ``escape`` (its check for lazy text) 2 us (the same
        HTML, tests/portal/test_admin_lists.py)."""
        label = _selection_label(translation.get_language()).format(html.escape(str(obj)))
        return mark_safe(
            f'<input type="checkbox" name="{helpers.ACTION_CHECKBOX_NAME}" value="{html.escape(str(obj.pk))}" '
            f'class="action-select" aria-label="{label}">'
        )

    def get_list_filter(self, request):
        filters = [("cluster", ClusterFilter), "sync_state", *self.kind_list_filter, "namespace"]
        return [(name, IndexedValuesFilter) if name in self.indexed_filters else name for name in filters]

    def get_readonly_fields(self, request, obj=None):
        readonly = [
            *self.sync_fields,
            "status_yaml",
            "conflict_table",
            "audit_history",
            "last_synced_spec_yaml",
            *map(_as_shown, self.model.projected_fields()),
        ]
        return [*readonly, "cluster", "namespace", "name"] if obj else readonly

    def get_fieldsets(self, request, obj=None):
        identity = ["cluster", "namespace", "name", "labels", "annotations", KubeObjectForm.COPY_FIELD]
        return [
            (None, {"fields": identity}),
            ("Spec", {"fields": ["spec"]}),
            ("Status (from the cluster)", {"fields": ["status_yaml"]}),
            ("Derived columns", {"fields": [*map(_as_shown, self.model.projected_fields())], "classes": ["collapse"]}),
            ("Sync", {"fields": [*self.sync_fields, "conflict_table", "last_synced_spec_yaml"]}),
            ("History", {"fields": ["audit_history"], "classes": ["collapse"]}),
        ]

    @admin.display(description="Conflict")
    def conflict_table(self, obj: KubeObject) -> str:
        """Each conflicting field with its base, portal and cluster values; resolve with the actions."""
        if not obj.conflict:
            return "—"
        rows = format_html_join(
            "",
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (field["path"], _value(field, "base"), _value(field, "portal"), _value(field, "cluster"))
                for field in obj.conflict.get("fields") or []
            ),
        )
        return format_html(
            "<p>{}</p><table><tr><th>field</th><th>base</th><th>portal</th><th>cluster</th></tr>{}</table>"
            "<p>Resolve from the list page: actions “Resolve conflicts: keep the portal's values” or "
            "“… take the cluster's values”, or edit the spec and save.</p>",
            obj.conflict.get("message", ""),
            rows,
        )

    @admin.display(description="Audit history (newest first)")
    def audit_history(self, obj: KubeObject) -> str:
        """Each change as its field path with the old and new values in YAML, as on the portal's pages."""
        entries = AuditEntry.objects.filter(kind=obj.kube.kind, object_id=obj.pk)[:50]
        if not entries:
            return "—"
        return render_to_string("portal/_audit.html", {"audit": entries})

    @admin.action(description="Resolve conflicts: keep the portal's values (applied over the cluster's)")
    def resolve_take_portal(self, request, queryset):
        self._resolve(request, queryset, Resolution.TAKE_PORTAL)

    @admin.action(description="Resolve conflicts: take the cluster's values")
    def resolve_take_cluster(self, request, queryset):
        self._resolve(request, queryset, Resolution.TAKE_CLUSTER)

    def _resolve(self, request, queryset, take: str) -> None:
        actor = Actor.from_request(request, AuditEntry.Source.ADMIN)
        conflicted = [obj for obj in queryset if obj.sync_state == SyncState.CONFLICT]
        for obj in conflicted:
            resolve_conflict(obj, take, actor)
        skipped = queryset.count() - len(conflicted)
        self.message_user(
            request,
            f"resolved {len(conflicted)} conflict(s)"
            + (f"; {skipped} selected object(s) had no conflict" if skipped else ""),
        )

    @admin.display(description="Status")
    def status_yaml(self, obj: KubeObject) -> str:
        return _yaml_block(obj.status)

    @admin.display(description="Last synced spec")
    def last_synced_spec_yaml(self, obj: KubeObject) -> str:
        return _yaml_block(obj.last_synced_spec)

    def save_model(self, request, obj, form, change):
        """The form checked the version it was opened on (``CopyVersionMixin``) in this transaction."""
        made_from = form.cleaned_data[form.COPY_FIELD] if change else None
        save_portal_edit(obj, Actor.from_request(request, AuditEntry.Source.ADMIN), made_from=made_from)

    def delete_model(self, request, obj):
        request_delete(obj, Actor.from_request(request, AuditEntry.Source.ADMIN))

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            self.delete_model(request, obj)
