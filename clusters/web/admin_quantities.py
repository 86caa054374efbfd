"""Byte columns in the admin as Kubernetes quantities: ``96Gi`` shown and entered, never
``103079215104``.

The database keeps bytes (sums and comparisons stay in SQL); people read and write the unit
their manifests use. A value is parsed by the official client's quantity parser, so whatever a
manifest accepts (``96Gi``, ``100G``, ``1.5Ti``, ``512Mi``, plain bytes) is accepted here.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from django import forms
from django.contrib import admin
from kubernetes.utils import parse_quantity

from clusters.validation.limits import INT64_MAX
from clusters.validation.quantities import format_bytes


def show_bytes(amount: int | None) -> str:
    """``96Gi``; ``—`` when unknown."""
    return "—" if amount is None else format_bytes(amount)


class QuantityInput(forms.TextInput):
    """Shows a stored byte count as a quantity; what was typed is shown back unchanged on errors."""

    def format_value(self, value: Any) -> str | None:
        if isinstance(value, int):
            return format_bytes(value)
        return super().format_value(value)


class QuantityField(forms.Field):
    """A memory size as a Kubernetes quantity, cleaned to whole bytes."""

    widget = QuantityInput
    default_error_messages = {
        "invalid": "%(value)r is not a Kubernetes quantity (such as 96Gi, 512Mi, 100G or a number of bytes)",
        "fraction": "%(value)r is not a whole number of bytes",
        "range": "%(value)r must be between 0 and 8Ei (int64 bytes)",
    }

    def __init__(self, *, max_value: int = INT64_MAX, **kwargs: Any) -> None:
        kwargs.pop("max_length", None)
        kwargs.setdefault("help_text", "A quantity, e.g. 96Gi or 512Mi.")
        self.max_value = max_value
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> int | None:
        if value in (None, ""):
            return None
        if isinstance(value, int):
            return value
        text = str(value).strip()
        try:
            amount = parse_quantity(text)
        except (ValueError, TypeError, InvalidOperation):
            error = self.error_messages["invalid"]
            raise forms.ValidationError(error, code="invalid", params={"value": text}) from None
        if amount != amount.to_integral_value():
            raise forms.ValidationError(self.error_messages["fraction"], code="fraction", params={"value": text})
        if not Decimal(0) <= amount <= self.max_value:
            raise forms.ValidationError(self.error_messages["range"], code="range", params={"value": text})
        return int(amount)


def quantity_label(verbose_name: str) -> str:
    """``gpu memory bytes`` -> ``GPU memory``: the unit is in the value now."""
    words = [word for word in verbose_name.split() if word != "bytes"]
    return " ".join(words).capitalize().replace("Gpu", "GPU")


def quantity_column(field: str, description: str) -> Callable[[Any, Any], str]:
    """A list_display / readonly column showing ``field`` (bytes) as a quantity, sortable by it."""

    @admin.display(description=description, ordering=field)
    def column(_admin: Any, obj: Any) -> str:
        return show_bytes(getattr(obj, field))

    column.__name__ = f"{field}_quantity"
    return column


class QuantityAdminMixin:
    """``quantity_fields`` are edited through :class:`QuantityField`; ``<field>_quantity`` names a
    read-only or list column showing any byte field as a quantity."""

    quantity_fields: tuple[str, ...] = ()

    def __getattr__(self, name: str) -> Any:
        field = name.removesuffix("_quantity")
        if field != name and field.endswith("_bytes"):
            label = quantity_label(self.model._meta.get_field(field).verbose_name)
            # made once: the changelist looks each column up for every row (200 times a page)
            column = self.__dict__[name] = quantity_column(field, label).__get__(self)
            return column
        raise AttributeError(name)

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if db_field.name in self.quantity_fields:
            return QuantityField(
                required=not db_field.blank, label=quantity_label(db_field.verbose_name),
                help_text=db_field.help_text or "A quantity, e.g. 96Gi or 512Mi.",
            )  # fmt: skip
        return super().formfield_for_dbfield(db_field, request, **kwargs)
