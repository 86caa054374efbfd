"""Form pieces shared by the admin and portal forms for mirrored objects."""

from __future__ import annotations

from typing import Any

import yaml
from django import forms

from clusters import yaml_input


def to_yaml(value: Any) -> str:
    """Block-style YAML in the field order people wrote (no key sorting)."""
    if value in (None, {}, []):
        return ""
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True)


class YAMLField(forms.CharField):
    """Edit a JSON value as YAML; parse errors name the line and column."""

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
        try:
            parsed = yaml_input.load(text)
        except yaml.YAMLError as error:
            raise forms.ValidationError(f"is not valid YAML{yaml_input.describe(error)}") from None
        if not isinstance(parsed, dict):
            raise forms.ValidationError(f"must be a mapping (key: value lines), not {type(parsed).__name__}")
        return parsed

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return self.to_python(data) != (initial or self.empty_yaml)
        except forms.ValidationError:
            return True


class KubeObjectForm(forms.ModelForm):
    """Edit name, namespace, labels, annotations and spec; the model's ``clean()`` validates."""

    labels = YAMLField(help_text="Labels as YAML, e.g. 'team: ml-platform'.")
    annotations = YAMLField()
    spec = YAMLField(help_text="The spec as YAML; defaults from the CRD are filled in on save.")
