"""Form pieces shared by the admin and portal forms for mirrored objects."""

from __future__ import annotations

import json
from typing import Any

import yaml
from django import forms

from clusters.models import KubeObject
from clusters.validation import yaml_input
from clusters.validation.schemas import load_crd
from clusters.web.edits import EditRefused, StaleCopy, lock_for_edit


def to_yaml(value: Any) -> str:
    """Block-style YAML in the field order people wrote (no key sorting)."""
    if value in (None, {}, []):
        return ""
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True)


def crd_enum(model, *path: str) -> list[tuple[str, str]]:
    """Choices from the CRD's enum at ``spec.<path>`` (the CRD is the one source of allowed values)."""
    node = load_crd(model.kube)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for key in path:
        node = node["properties"][key] if key != "[]" else node["items"]
    return [("", "—")] + [(value, enum_label(value)) for value in node.get("enum", [])]


# enum values a reader takes for "no value" (Python's None, YAML's null): labelled as the values they are
_READ_AS_UNSET = {"None", "null", "Null", "NULL", "nil", "none"}


def enum_label(value: str) -> str:
    """A CRD enum value as shown: quoted and said to be a value where it reads as "nothing"."""
    return f'"{value}" (a value of its own, not unset)' if value in _READ_AS_UNSET else value


class YAMLField(forms.CharField):
    """Edit a JSON value as YAML; errors name the field, the line and the column (``spec: is not
    valid YAML at line 2, column 7: ...``), as every field error of the portal names its field:
    shown in a list of errors, or read out of context, "is not valid YAML" said of nothing
    (issue 43)."""

    subject = ""  # the field's name in its form, learnt when the form binds it

    widget = forms.Textarea(attrs={"rows": 16, "cols": 90, "style": "font-family: monospace"})

    def __init__(self, *args: Any, empty_value: Any = None, **kwargs: Any) -> None:
        self.empty_yaml = {} if empty_value is None else empty_value
        kwargs.setdefault("required", False)
        super().__init__(*args, **kwargs)

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        return to_yaml(value)

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        if not text.strip():
            return self.empty_yaml
        named = f"{self.subject}: " if self.subject else ""
        try:
            parsed = yaml_input.load(text)
        except yaml.YAMLError as error:
            raise forms.ValidationError(f"{named}is not valid YAML{yaml_input.describe(error)}") from None
        if not isinstance(parsed, dict):
            raise forms.ValidationError(f"{named}must be a mapping (key: value lines), not {type(parsed).__name__}")
        return parsed

    def get_bound_field(self, form: forms.BaseForm, field_name: str) -> forms.BoundField:
        """Bound before it is cleaned (each form holds its own copy of the field): its name is
        what its errors are about."""
        self.subject = field_name
        return super().get_bound_field(form, field_name)

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return self.to_python(data) != (initial or self.empty_yaml)
        except forms.ValidationError:
            return True


def _shown(value: Any) -> str:
    return "(not set)" if value is None else json.dumps(value)


def copy_version_field() -> forms.CharField:
    """The hidden field carrying the version a form was opened on (see :class:`CopyVersionMixin`)."""
    return forms.CharField(widget=forms.HiddenInput, required=False)


class CopyVersionMixin:
    """A form editing a mirrored object carries the version it was opened on (a hidden field,
    ``edit_version = copy_version_field()``) and refuses to save over a row that changed
    since, listing the differences (``clusters.web.edits``).

    After such a refusal the hidden field holds the current version: saving the same values again
    is then a deliberate overwrite by someone who has seen what it replaces. The check locks the
    row, so the view must run the form's validation and save in one transaction.
    """

    COPY_FIELD = "edit_version"

    def open_copy(self, instance: KubeObject | None) -> None:
        """Record the version of the row the form shows."""
        self.fields[self.COPY_FIELD].initial = instance.edit_version() if instance else ""

    def check_copy(self, instance: KubeObject | None, made_from: str, submitted: dict[str, Any]) -> None:
        if instance is None or instance.pk is None:
            return
        try:
            lock_for_edit(type(instance), instance.pk, made_from, submitted)
        except StaleCopy as stale:
            differences = "; ".join(
                f"{change['path']} is {_shown(change['current'])} now, yours {_shown(change['yours'])}"
                for change in stale.differences
            )
            self.add_error(
                None,
                f"This {instance.kube.kind} changed since you opened it (it is {stale.state} now). "
                f"Where your values differ from the current ones: {differences or 'nowhere'}. "
                "Saving again replaces the current values with yours.",
            )
            data = self.data.copy()
            data[self.add_prefix(self.COPY_FIELD)] = stale.current
            self.data = data
        except EditRefused as refused:
            self.add_error(None, refused.errors[0].message)


class KubeObjectForm(CopyVersionMixin, forms.ModelForm):
    """Edit name, namespace, labels, annotations and spec; the model's ``clean()`` validates."""

    labels = YAMLField(help_text="Labels as YAML, e.g. 'team: ml-platform'.")
    annotations = YAMLField()
    spec = YAMLField(help_text="The spec as YAML; defaults from the CRD are filled in on save.")
    edit_version = copy_version_field()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open_copy(self.instance if self.instance.pk else None)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if not self.errors:
            submitted = {key: data.get(key) or {} for key in ("spec", "labels", "annotations")}
            self.check_copy(self.instance, data.get(self.COPY_FIELD, ""), submitted)
        return data
