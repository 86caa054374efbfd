"""Django's ``Form.as_p`` written out in Python for a form of labelled selects, text areas and
check boxes without errors: the planning page renders its what-if form on every plan.

Why: Django renders ``as_p`` through its form templates: the form's, then per field a label's,
an error list's and a widget's (a select's ``attrs`` and each option's included again), two
dozen template renders for the planning form's four fields, 1.5 ms of each what-if page; this
spelling takes about 0.2 ms.

Same HTML: the widgets' contexts are Django's own (``BoundField.build_widget_attrs``,
``Widget.get_context``, which pick the value, the selected options and the ``required``,
``checked`` and ``id`` attributes); only the templates' text is written here, with their
whitespace, and escaped as the templates escape (:func:`scheduler.escaping.escaped`). Anything
else (errors, hidden fields, help texts, CSS classes, disabled or localized fields, option
groups, other widgets, another form template) returns None, and the caller renders with Django.
tests/scheduler/test_pages.py compares both renderings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.forms.boundfield import BoundField
from django.forms.widgets import CheckboxInput, Select, Textarea
from django.utils.safestring import SafeString
from django.utils.translation import gettext

from scheduler.escaping import escaped

DJANGO_P = "django/forms/p.html"


def _attrs(attrs: dict[str, Any]) -> str:
    """django/forms/widgets/attrs.html."""
    return "".join(
        f" {escaped(name)}" if value is True else f' {escaped(name)}="{escaped(value)}"'
        for name, value in attrs.items()
        if value is not False
    )


def _select(widget: dict[str, Any]) -> str | None:
    """django/forms/widgets/select.html, each option select_option.html (which ends in a newline)."""
    options = []
    for group_name, group_choices, _ in widget["optgroups"]:
        if group_name:
            return None
        options.extend(
            f'\n  <option value="{escaped(option["value"])}"{_attrs(option["attrs"])}>'
            f'{escaped(option["label"])}</option>\n'
            for option in group_choices
        )
    return f'<select name="{escaped(widget["name"])}"{_attrs(widget["attrs"])}>{"".join(options)}\n</select>'


def _textarea(widget: dict[str, Any]) -> str:
    """django/forms/widgets/textarea.html."""
    value = escaped(widget["value"]) if widget["value"] else ""
    return f'<textarea name="{escaped(widget["name"])}"{_attrs(widget["attrs"])}>\n{value}</textarea>'


def _checkbox(widget: dict[str, Any]) -> str:
    """django/forms/widgets/checkbox.html (input.html)."""
    value = "" if widget["value"] is None else f' value="{escaped(widget["value"])}"'
    return f'<input type="{escaped(widget["type"])}" name="{escaped(widget["name"])}"{value}{_attrs(widget["attrs"])}>'


_WRITERS: dict[type, Callable[[dict[str, Any]], str | None]] = {
    Select: _select, Textarea: _textarea, CheckboxInput: _checkbox,
}  # fmt: skip


def _label(field: BoundField) -> str:
    """``field.label_tag()`` (django/forms/label.html) of a field with an id and no required CSS class."""
    suffix = field.field.label_suffix if field.field.label_suffix is not None else field.form.label_suffix
    contents = escaped(field.label)
    if suffix and field.label and field.label[-1] not in gettext(":?.!"):
        contents += escaped(suffix)
    return f'<label for="{escaped(field.field.widget.id_for_label(field.auto_id))}">{contents}</label>'


def _widget(field: BoundField) -> str | None:
    """``str(field)`` (``BoundField.as_widget``) where a writer knows the widget, else None."""
    widget = field.field.widget
    write = _WRITERS.get(type(widget))
    if write is None or field.field.localize or "id" in widget.attrs:
        return None
    attrs = field.build_widget_attrs({}, widget)
    attrs.setdefault("id", field.auto_id)
    return write(widget.get_context(field.html_name, field.value(), attrs)["widget"])


def plain_p(form: forms.Form) -> SafeString | None:
    """``form.as_p()``, the same HTML, where the form qualifies (see the module); else None."""
    if (form.errors or form.hidden_fields() or form.template_name_p != DJANGO_P
            or hasattr(form, "error_css_class") or hasattr(form, "required_css_class")):  # fmt: skip
        return None
    fields = form.visible_fields()
    rows = []
    for number, field in enumerate(fields, 1):
        if field.help_text or field.field.disabled or not field.label or not field.auto_id:
            return None
        widget = _widget(field)
        if widget is None:
            return None
        last = "\n      \n    " if number == len(fields) else ""  # the hidden fields' place, after the last
        rows.append(f"<p>\n    {_label(field)}\n    {widget}\n    \n    {last}\n  </p>")
    return SafeString("\n\n  \n  ".join(rows)) if rows else None
