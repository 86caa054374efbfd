"""JSON columns read with orjson (clusters.json_columns) give the values ``json.loads`` gives: what
PostgreSQL stores and prints, read back through the model, and texts of every number form."""

from __future__ import annotations

import json
import struct
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

from clusters.json_columns import JSONField
from clusters.models import Cluster, KubeObject
from models_app.models import InferenceModel, ServingModel

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's jsonb")

# jsonb texts as PostgreSQL takes them: integers past 64 bits (orjson would read them as floats),
# numbers jsonb prints without an exponent (1e400 as 401 digits, 1e-400 as 400 zeros and a 1),
# escapes, non-ASCII, nesting.
STORED = [
    "[9223372036854775807, 9223372036854775808, 18446744073709551615, 18446744073709551616]",
    "[-9223372036854775808, -9223372036854775809, 123456789012345678901234567890, -1e30]",
    "[0.1, 1e-7, 1.5e-5, 1e16, 1.7976931348623157e308, 5e-324, -0.0, 0, -0, 1.0, 100.50]",
    "[1e400, 1e-400, 0.30000000000000000000000000000000001, 12345678901234567.5]",
    '{"digits": "12345678901234567890", "short": "123", "memory": "64Gi", "n": 42}',
    '{"é": "ünïcødé", "emoji": "\\ud83d\\ude00", "sep": "\\u2028\\u2029", "ctl": "\\u001f\\t\\n\\"\\\\"}',
    '{"a": {"b": [1, {"c": null, "d": true, "e": false}]}, "": "", "empty": {}, "list": []}',
    "[" * 200 + "]" * 200,
    '"just a string"',
    "null",
    "12",
]


def typed(value: Any) -> Any:
    """``value`` with each number's type and float's bits (-0.0 is not 0.0), for exact comparison."""
    if isinstance(value, dict):
        return {key: typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [typed(item) for item in value]
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    return (type(value).__name__, value)


@pytest.mark.django_db
@pytest.mark.parametrize("text", STORED)
def test_a_column_reads_back_what_json_loads_reads_from_its_text(cluster: Cluster, text: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("UPDATE clusters_cluster SET namespaces = %s::jsonb WHERE id = %s", [text, cluster.pk])
        cursor.execute("SELECT namespaces::text FROM clusters_cluster WHERE id = %s", [cluster.pk])
        (printed,) = cursor.fetchone()
    assert typed(Cluster.objects.get(pk=cluster.pk).namespaces) == typed(json.loads(printed))


@pytest.mark.django_db
def test_lookups_and_key_transforms_still_read_through_postgresql(cluster: Cluster) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(namespaces=["team-a", {"big": 2**70, "x": 0.5}])
    assert Cluster.objects.filter(namespaces__contains=["team-a"]).get() == cluster
    assert Cluster.objects.filter(pk=cluster.pk).values_list("namespaces__1__big", flat=True).get() == 2**70
    assert Cluster.objects.filter(pk=cluster.pk).values_list("namespaces__1__x", flat=True).get() == 0.5
    assert Cluster.objects.filter(pk=cluster.pk).values_list("namespaces__0", flat=True).get() == "team-a"


def test_every_json_column_of_clusters_and_the_mirrored_kinds_reads_with_orjson() -> None:
    models = [Cluster, *_concrete(KubeObject)]
    assert InferenceModel in models and len([model for model in models if issubclass(model, ServingModel)]) >= 3
    plain = [f"{model.__name__}.{field.name}" for model in models for field in model._meta.concrete_fields
             if field.get_internal_type() == "JSONField" and not isinstance(field, JSONField)]  # fmt: skip
    assert plain == []


def test_the_field_deconstructs_as_djangos_so_migrations_record_nothing() -> None:
    name, path, _, kwargs = InferenceModel._meta.get_field("spec").deconstruct()
    assert (name, path, kwargs) == ("spec", "django.db.models.JSONField", {"blank": True, "default": dict})


def _concrete(base: type) -> list[type]:
    found = []
    for model in base.__subclasses__():
        found += [] if model._meta.abstract else [model]
        found += _concrete(model)
    return found


# Values with numbers of every form: integers of any length, floats (repr's exponents), decimals
# with long fractions (written as they are, as PostgreSQL prints numerics).
numbers = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.decimals(allow_nan=False, allow_infinity=False).filter(lambda number: "E" not in str(number)),
)
values = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, st.text()),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)


def as_text(value: Any, ascii_only: bool) -> str:
    """``value`` as JSON text, decimals written as they are."""
    if isinstance(value, dict):
        items = (
            f"{json.dumps(key, ensure_ascii=ascii_only)}: {as_text(item, ascii_only)}" for key, item in value.items()
        )
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(as_text(item, ascii_only) for item in value) + "]"
    if isinstance(value, Decimal):
        return str(value)
    return json.dumps(value, ensure_ascii=ascii_only)


@settings(max_examples=500, deadline=None)
@given(values, st.booleans())
def test_any_json_text_reads_as_json_loads_reads_it(value: Any, ascii_only: bool) -> None:
    text = as_text(value, ascii_only)
    field = InferenceModel._meta.get_field("spec")
    assert typed(field.from_db_value(text, None, connection)) == typed(json.loads(text))


def test_what_orjson_refuses_is_read_as_before() -> None:
    """A lone surrogate's escape (jsonb refuses it, a text from elsewhere may have it) and what
    is no JSON at all: json.loads' value, or the text itself as Django's field answers."""
    field = InferenceModel._meta.get_field("spec")
    assert field.from_db_value('"\\ud800"', None, connection) == "\ud800"
    assert field.from_db_value("not json", None, connection) == "not json"
    assert field.from_db_value(None, None, connection) is None
