"""``{{ value|enum_label }}``: a CRD enum value as the forms show it, so the value ``None`` (an
InferenceConfig's autoDeletePolicy) never reads as Python's "nothing"."""

from __future__ import annotations

from django import template

from clusters.web.forms import enum_label

register = template.Library()
register.filter("enum_label", enum_label)
