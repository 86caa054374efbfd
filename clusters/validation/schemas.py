"""One validation path for every mirrored kind, used by model ``clean()``, the API, forms and admin.

The CRD schema in ``platform/crds/`` is the single source of truth. This module reads it,
applies its defaults the way the API server does (structural defaulting), validates with
``jsonschema`` (unknown fields are refused, as ``kubectl``'s strict field validation does) and
turns each failure into a :class:`FieldError` naming the field, the value and the rule. The few
rules a schema cannot say live next to their kind as ``extra_rules`` and use the same error type.
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from django.conf import settings

from clusters.kinds import KindInfo
from clusters.validation.limits import INT32_MAX, INT64_MAX, MAX_ERRORS, MAX_QUOTED_CHARS
from clusters.validation.pattern_words import pattern_rule

MISSING: Any = object()  # marks "no value" in FieldError (e.g. a missing required field)


def clip(text: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was: a refused megabyte is not echoed."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


@dataclass(frozen=True)
class FieldError:
    """One broken rule: ``path`` is dotted (``spec.files[0].path``), ``rule`` reads as a sentence.

    Path and quoted value are clipped, so a reply is never much larger than the input's shape.
    """

    path: str
    value: Any
    rule: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", clip(self.path))

    @property
    def message(self) -> str:
        if self.value is MISSING:
            return f"{self.path}: {self.rule}"
        return f"{self.path}: {clip(json.dumps(self.value, default=str))} {self.rule}"


class ManifestInvalid(Exception):
    """Raised with every FieldError found (up to MAX_ERRORS), so callers can show them at once."""

    def __init__(self, errors: list[FieldError]):
        if len(errors) > MAX_ERRORS:
            more = len(errors) - MAX_ERRORS
            errors = [*errors[:MAX_ERRORS], FieldError("(more)", MISSING, f"{more} more errors are not shown")]
        self.errors = errors
        super().__init__("; ".join(error.message for error in errors))


@functools.cache
def load_crd(info: KindInfo) -> dict[str, Any]:
    """The CRD manifest of a kind, read once from ``platform/crds/<plural>.<group>.yaml``."""
    path = Path(settings.CRD_DIR) / f"{info.crd_name}.yaml"
    with path.open() as handle:
        return yaml.safe_load(handle)


def openapi_schema(info: KindInfo) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of the kind's version."""
    crd = load_crd(info)
    for version in crd["spec"]["versions"]:
        if version["name"] == info.version:
            return version["schema"]["openAPIV3Schema"]
    raise LookupError(f"{info.crd_name}.yaml has no version {info.version}")


def _to_json_schema(node: dict[str, Any]) -> dict[str, Any]:
    """Translate Kubernetes' OpenAPI dialect to Draft 7: closed objects, nullable, int-or-string."""
    out = {k: v for k, v in node.items() if not k.startswith("x-kubernetes-") and k != "nullable"}
    pattern = node.get("pattern")
    if isinstance(pattern, str) and pattern.endswith("$") and not pattern.endswith("\\$"):
        # Go's `$` is end of text; Python's also matches before a final newline ("16Gi\n").
        out["pattern"] = pattern[:-1] + "\\Z"
        out["x-crd-pattern"] = pattern  # what error messages quote: the CRD's own text
    if node.get("type") == "integer" and "format" not in node:
        out["format"] = "int64"  # the API server decodes an integer without a format as int64
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if "properties" in node:
        out["properties"] = {name: _to_json_schema(sub) for name, sub in node["properties"].items()}
        if not node.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in node:
            out["additionalProperties"] = False
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = _to_json_schema(node["additionalProperties"])
    if isinstance(node.get("items"), dict):
        out["items"] = _to_json_schema(node["items"])
    return out


_INTEGER_RANGES = {"int32": (-INT32_MAX - 1, INT32_MAX), "int64": (-INT64_MAX - 1, INT64_MAX)}


def _format_checker() -> jsonschema.FormatChecker:
    """Draft 7's formats plus the OpenAPI integer formats Kubernetes enforces (``int32``, ``int64``)."""
    checker = copy.deepcopy(jsonschema.Draft7Validator.FORMAT_CHECKER)
    for name, (low, high) in _INTEGER_RANGES.items():
        checker.checks(name)(
            lambda value, low=low, high=high: (
                isinstance(value, bool) or not isinstance(value, int | float) or low <= value <= high
            )
        )
    return checker


@functools.cache
def _validator(info: KindInfo) -> jsonschema.Draft7Validator:
    schema = _to_json_schema(openapi_schema(info))
    # metadata, apiVersion and kind are checked by metadata rules, not by the CRD schema.
    schema.setdefault("properties", {})["metadata"] = {"type": "object"}
    return jsonschema.Draft7Validator(schema, format_checker=_format_checker())


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Fill absent fields with their schema ``default``, recursively, like the API server.

    Returns a new value; the input is left untouched so callers can diff before/after.
    """
    if isinstance(value, dict):
        result = dict(value)
        for name, sub in schema.get("properties", {}).items():
            if name not in result and "default" in sub:
                result[name] = copy.deepcopy(sub["default"])
            if name in result:
                result[name] = apply_defaults(sub, result[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name in result.keys() - schema.get("properties", {}).keys():
                result[name] = apply_defaults(extra, result[name])
        return result
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], item) for item in value]
    return value


def dotted(path: list[Any]) -> str:
    """``["spec", "files", 0, "path"]`` -> ``spec.files[0].path``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(root)"


def _field_errors(error: jsonschema.ValidationError) -> list[FieldError]:
    """Word a jsonschema failure as field + value + rule, the way a person would say it.

    ``required`` and ``additionalProperties`` report once per object; they are split here into
    one error per missing or unknown field.
    """
    path = list(error.absolute_path)
    kind, expected, value = error.validator, error.validator_value, error.instance
    if kind == "required":
        return [FieldError(dotted([*path, name]), MISSING, "is required") for name in expected if name not in value]
    if kind == "additionalProperties":
        known = set(error.schema.get("properties", {}))
        allowed = ", ".join(sorted(known)) or "none"
        return [
            FieldError(dotted([*path, name]), MISSING, f"is not a known field (allowed: {allowed})")
            for name in sorted(set(value) - known)
        ]
    rules = {
        "pattern": lambda: pattern_rule(error.schema.get("x-crd-pattern", expected)),
        "enum": lambda: "is not one of: " + ", ".join(str(item) for item in expected),
        "minimum": lambda: f"is less than the minimum {expected}",
        "maximum": lambda: f"is greater than the maximum {expected}",
        "minLength": lambda: f"is shorter than {expected} characters",
        "maxLength": lambda: f"is longer than {expected} characters (length {len(value)})",
        "maxItems": lambda: f"has {len(value)} items, more than the maximum {expected}",
        "minItems": lambda: f"has {len(value)} items, fewer than the minimum {expected}",
        "type": lambda: f"is not of type {expected}",
        "format": lambda: _format_rule(expected),
    }
    rule = rules.get(kind, lambda: f"breaks the rule {kind}={expected!r}")()
    return [FieldError(dotted(path), value, rule)]


def _format_rule(name: str) -> str:
    if name in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[name]
        return f"is outside the {name} range ({low} to {high})"
    return f"is not a valid {name}"


def schema_errors(info: KindInfo, manifest: dict[str, Any]) -> list[FieldError]:
    """Every schema violation of a (defaulted) manifest, sorted by field path."""
    unique = {
        (error.path, error.rule): error
        for failure in _validator(info).iter_errors(manifest)
        for error in _field_errors(failure)
    }
    return sorted(unique.values(), key=lambda error: error.path)


def default_manifest(info: KindInfo, manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest with the CRD's defaults applied (metadata untouched)."""
    return apply_defaults(openapi_schema(info), manifest)
