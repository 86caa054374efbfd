"""A changelist page's rows as Django's admin writes them (``items_for_result``), for a fraction of
the CPU.

Django works out, for every cell of every row, how its column is looked up, its CSS class, whether
it links to the change page, and that link: a ``reverse()`` and a ``resolve()`` per row to keep the
list's filters in it. At 100 rows x 11 columns that was 60 ms of a 110 ms changelist page of the
mirrored kinds (100,000 InferenceModels). Here a column is worked out once per page, the change
link once per page (only the primary key differs between rows), and a column's rendering of a
value once per distinct value: a page shows a handful of clusters' namespaces, pools, states and
booleans, and Django renders each the same way every time.

The HTML is Django's, cell for cell (tests/portal/test_admin_lists.py compares the two). An
editable list, a popup, and keys other than integers (whose quoting in a URL would have to be
repeated here) are left to Django (:func:`covers`).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Hashable
from html import escape
from operator import attrgetter
from typing import Any

from django.conf import settings
from django.contrib.admin.templatetags import admin_list
from django.contrib.admin.templatetags.admin_list import _coerce_field_name
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.contrib.admin.utils import (
    FieldIsAForeignKeyColumnName,
    _get_non_gfk_field,
    display_for_field,
    display_for_value,
    lookup_field,
)
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import FieldDoesNotExist, ObjectDoesNotExist
from django.db import models
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.formats import get_format
from django.utils.safestring import SafeString

Cell = Callable[[models.Model], str]  # a row's cell, as HTML
Shown = tuple[str, str]  # a cell's ' class="..."' and its escaped content

# values whose rendering their type and value alone decide: ``1 == True`` and ``Decimal("1.0") ==
# Decimal("1.00")`` render differently, so keys carry the exact type and only these types are kept
_REMEMBERED_TYPES = frozenset({str, int, bool, type(None)})
# django.utils.dateformat's codes that show more than the minute (seconds, microseconds, ISO 8601,
# RFC 5322, Unix time); found anywhere in a format, even escaped, a timestamp is formatted each time
_BELOW_A_MINUTE = frozenset("sucrU")
_PK_PLACEHOLDER = "PRIMARYKEY"  # letters: neither the admin's quote() nor a URL's changes them


def covers(cl: ChangeList) -> bool:
    """Whether :func:`result_rows` renders this page: not an editable list (its cells are form
    fields) nor a popup (its links carry data for the opener), and an integer primary key."""
    return not cl.formset and not cl.is_popup and isinstance(cl.lookup_opts.pk, models.IntegerField)


def result_list(cl: ChangeList) -> dict[str, Any]:
    """The context of ``admin/change_list_results.html``, as Django's ``result_list`` tag makes it,
    with the rows from :func:`result_rows` where they cover the page."""
    if not covers(cl):
        return admin_list.result_list(cl)
    headers = list(admin_list.result_headers(cl))
    return {
        "cl": cl,
        "result_hidden_fields": [],  # an editable list's (not covered)
        "result_headers": headers,
        "num_sorted_fields": sum(1 for header in headers if header["sortable"] and header["sorted"]),
        "results": [admin_list.ResultList(None, [row]) for row in result_rows(cl)],
    }


def result_rows(cl: ChangeList) -> list[SafeString]:
    """Each of the page's rows as the HTML of its cells, as ``items_for_result`` writes them, in
    one piece: ``change_list_results.html`` writes a row's items one after another, so a row as one
    item is the same HTML, rendered by the template in one step instead of one per cell."""
    if not cl.result_list:
        return []
    cells = _cells(cl)
    return [SafeString("".join([cell(obj) for cell in cells])) for obj in cl.result_list]


def _cells(cl: ChangeList) -> list[Cell]:
    """One function per column; the first linked column (``list_display_links``, else the first
    column) is a ``<th>``, as Django's ``link_in_col`` decides it."""
    link = _change_link(cl)
    cells, first = [], True
    for index, name in enumerate(cl.list_display):
        linked = cl.list_display_links is not None and (
            (first and not cl.list_display_links) or name in cl.list_display_links
        )
        cells.append(_cell(cl, index, name, "th" if linked and first else "td", link if linked else None, linked))
        first = first and not linked
    return cells


def _change_link(cl: ChangeList) -> Callable[[models.Model], str] | None:
    """The escaped change URL of a row, the list's filters kept in it (``_changelist_filters``):
    Django's ``url_for_result`` and ``add_preserved_filters``, worked out once with a placeholder
    key. None where the admin has no change view."""
    site = cl.model_admin.admin_site.name
    try:
        url = reverse(f"admin:{cl.opts.app_label}_{cl.opts.model_name}_change", args=(_PK_PLACEHOLDER,),
                      current_app=site)  # fmt: skip
    except NoReverseMatch:
        return None
    url = add_preserved_filters({"preserved_filters": cl.preserved_filters, "opts": cl.opts}, url)
    path, mark, query = url.partition("?")
    before, _, after = path.rpartition(_PK_PLACEHOLDER)
    before, after, key = escape(before), escape(after + mark + query), cl.lookup_opts.pk.attname
    return lambda obj: f"{before}{getattr(obj, key)}{after}"


def _cell(
    cl: ChangeList, index: int, name: Any, tag: str, link: Callable[[models.Model], str] | None, linked: bool
) -> Cell:
    """Column ``name``'s cell of a row: ``items_for_result``'s steps for one column, its lookup
    chosen once, and, but in a linked column (its link is the row's), each distinct value's cell
    (by :func:`_key_of`) kept for the rest of the page."""
    empty = cl.model_admin.get_empty_value_display()
    field, attr, read = _lookup(cl, name)
    css = f"field-{_coerce_field_name(name, index)}"
    if field is not None and not field.auto_created:
        show = _field_shown(field, css, empty, avoid_link=linked)
    else:
        show = _value_shown("action-checkbox" if name == "action_checkbox" else css, empty, attr)
    missing = (f' class="{css}"', _escaped(empty))  # a related row gone (ObjectDoesNotExist)

    def shown(obj: models.Model) -> Shown:
        try:
            if read is None:  # a model's attribute: Django's own lookup, row by row
                _, found, value = lookup_field(name, obj, cl.model_admin)
                return _value_shown(css, empty, found)(_blank_as_empty(value))
            return show(_blank_as_empty(read(obj)))
        except ObjectDoesNotExist:
            return missing

    if linked:

        def linked_cell(obj: models.Model) -> str:
            attributes, content = shown(obj)
            inner = content if link is None else f'<a href="{link(obj)}">{content}</a>'
            return f"<{tag}{attributes}>{inner}</{tag}>"

        return linked_cell
    if read is None:
        return lambda obj: "<td{}>{}</td>".format(*shown(obj))
    key_of = _related_key if isinstance(field, models.ForeignKey) else _key_of(isinstance(field, models.DateTimeField))
    seen: dict[Hashable, str] = {}

    def kept_cell(obj: models.Model) -> str:
        try:
            value = read(obj)
        except ObjectDoesNotExist:
            return "<td{}>{}</td>".format(*missing)
        key = key_of(value)
        cell = None if key is None else seen.get(key)
        if cell is None:
            cell = "<td{}>{}</td>".format(*show(_blank_as_empty(value)))
            if key is not None:
                seen[key] = cell
        return cell

    return kept_cell


def _escaped(text: Any) -> str:
    """``conditional_escape(text)`` (HTML as it is, anything else escaped) without its check of every
    argument for a lazy translation, a tenth of the rows' time: Django's ``escape`` is ``html.escape``
    of the text, and ``str()`` reads a lazy one as that check would."""
    return text.__html__() if hasattr(text, "__html__") else escape(str(text))


def _blank_as_empty(value: Any) -> Any:
    return "" if isinstance(value, str) and not value.strip() else value


def _key_of(timestamps: bool) -> Callable[[Any], Hashable | None]:
    """What a column's values are rendered once per page by: the value itself for the types in
    ``_REMEMBERED_TYPES``; for a timestamp column shown to the minute (the admin's
    ``DATETIME_FORMAT`` in the current language has no seconds: ``Nov. 26, 2026, 1:26 p.m.``),
    the local minute, as rows written by one sync share it and each took 60-90 us to format.
    None: render it every time."""

    if not timestamps or set(get_format("DATETIME_FORMAT")) & _BELOW_A_MINUTE:
        return _exact

    zone = timezone.get_current_timezone() if settings.USE_TZ else None  # once: 8 us a row as a thread's

    def minute(value: Any) -> Hashable | None:
        if not isinstance(value, datetime.datetime):
            return _exact(value)
        # what display_for_field shows: timezone.template_localtime, in the page's time zone
        converted = zone is not None and timezone.is_aware(value) and getattr(value, "convert_to_local_time", True)
        local = value.astimezone(zone) if converted else value
        return datetime.datetime, local.replace(second=0, microsecond=0, tzinfo=None), local.fold

    return minute


def _exact(value: Any) -> Hashable | None:
    return (type(value), value) if type(value) in _REMEMBERED_TYPES else None


def _related_key(related: Any) -> Hashable | None:
    """A foreign key column's values by the related row's key: a page's rows are read in one query,
    so the rows of one cluster show it the same way (its name), and a page of ten clusters renders
    ten cells, not a hundred."""
    if isinstance(related, models.Model) and related.pk is not None:
        return type(related), related.pk
    return _exact(related)


def _lookup(cl: ChangeList, name: Any) -> tuple[models.Field | None, Any, Callable[[Any], Any] | None]:
    """``lookup_field``'s choice for column ``name``, made once: (field, None, read) for a model
    field, (None, callable, callable) for the admin's or a given callable, and (None, None, None)
    for anything else (a method or property of the model, looked up per row)."""
    try:
        field = _get_non_gfk_field(cl.lookup_opts, name)
    except (FieldDoesNotExist, FieldIsAForeignKeyColumnName):
        if callable(name):
            return None, name, name
        if hasattr(cl.model_admin, name) and name != "__str__":
            method = getattr(cl.model_admin, name)
            return None, method, method
        return None, None, None
    return field, None, attrgetter(name)


def _field_shown(field: models.Field, css: str, empty: str, avoid_link: bool) -> Callable[[Any], Shown]:
    """How a model field's value is shown (``display_for_field``; a foreign key as its row)."""
    if isinstance(field, models.DateField | models.TimeField | models.ForeignKey):
        css += " nowrap"
    attributes = f' class="{css}"'
    if isinstance(field.remote_field, models.ManyToOneRel):
        return lambda related: (attributes, _escaped(empty if related is None else related))
    return lambda value: (attributes, _escaped(display_for_field(value, field, empty, avoid_link)))


def _value_shown(css: str, empty: str, attr: Any) -> Callable[[Any], Shown]:
    """How a callable's or attribute's value is shown (``display_for_value``), as ``attr`` asks:
    ``boolean`` and ``empty_value_display`` from ``@admin.display``."""
    empty = getattr(attr, "empty_value_display", empty)
    boolean = getattr(attr.fget if isinstance(attr, property) else attr, "boolean", False)

    def shown(value: Any) -> Shown:
        attributes = f' class="{css} nowrap"' if isinstance(value, datetime.date | datetime.time) else f' class="{css}"'
        return attributes, _escaped(display_for_value(value, empty, boolean))

    return shown
