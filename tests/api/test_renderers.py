"""The mirrored kinds' JSON renderer (clusters.web.api.renderers) writes DRF's renderer's bytes,
or raises what it raises, for every kind of value a response may hold."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import math
import uuid
import zoneinfo
from collections import OrderedDict, namedtuple
from typing import Any

import pytest
from django.db import models
from django.utils.functional import lazy
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework import renderers
from rest_framework.exceptions import ErrorDetail
from rest_framework.utils.serializer_helpers import ReturnDict, ReturnList

from clusters.models import SyncState
from clusters.web.api.renderers import JSONRenderer
from models_app.api.views import InferenceModelViewSet


class Color(models.IntegerChoices):
    RED = 1


class Plain(enum.Enum):
    A = "a"


@dataclasses.dataclass
class Point:
    x: int


class Items(dict):
    """A dict whose items() differ from its storage: json.dumps writes items()."""

    def items(self):
        return [("shown", 1)]


Pair = namedtuple("Pair", "left right")
UTC = datetime.UTC
moved = OrderedDict(a=1, b=2)
moved.move_to_end("a")


def drf(data: Any, media_type: str | None = None) -> bytes:
    return renderers.JSONRenderer().render(data, media_type)


def ours(data: Any, media_type: str | None = None) -> bytes:
    return JSONRenderer().render(data, media_type)


SAME = {
    "floats": [0.1, -0.0, 1e16, 1e22, 1.5e-5, 1e-7, 2.5e-9, 1e-10, 0.0001, 5e-324, 1.7976931348623157e308, 123.0],
    "floats in strings": ["0.00001", "v1e-5", "node-1", "1e-5x"],
    "integers": [0, -1, 2**63 - 1, -(2**63), 2**64 - 1, 2**64, -(2**63) - 1, 10**30],
    "text": 'é ünï 😀 \u2028 \u2029 \u2027 \u2030 \x00 \x1f \x7f " \\ / <script>',
    "keys": {1: "int", 2.5: "float", False: "bool", None: "none"},
    "times": [
        datetime.datetime(2026, 1, 1, 10, 0, 0, 123456, tzinfo=UTC),
        datetime.datetime(2026, 1, 1, 10, 0, tzinfo=UTC),
        datetime.datetime(2026, 1, 1, 10, 0, tzinfo=zoneinfo.ZoneInfo("Europe/London")),
        datetime.datetime(2026, 7, 1, 10, 0, tzinfo=zoneinfo.ZoneInfo("America/New_York")),
        datetime.datetime(2026, 1, 1, 10, 0),
        datetime.date(2026, 1, 1),
        datetime.time(10, 0, 1, 5),
        datetime.timedelta(seconds=90.5),
    ],
    "others": [decimal.Decimal("1.10"), uuid.UUID(int=12345), lazy(lambda: "lazy", str)(), b"bytes", {7}],
    "subclasses": [
        ReturnDict({"a": 1}, serializer=None),
        ReturnList([1, 2], serializer=None),
        SyncState.SYNCED,
        Color.RED,
        ErrorDetail("bad", code="invalid"),
        Pair(1, 2),
        moved,
        Items(hidden=2),
    ],
    "nested": {"a": [{"b": {"c": [[], {}, None, True, False]}}]},
    "empty": [{}, [], "", 0],
}


@pytest.mark.parametrize("name", list(SAME))
def test_every_kind_of_value_renders_as_drf_renders_it(name: str) -> None:
    assert ours(SAME[name]) == drf(SAME[name])
    assert ours({"results": [SAME[name]]}) == drf({"results": [SAME[name]]})


def test_deep_nesting_and_wide_integers_render_as_drf_renders_them() -> None:
    deep: Any = 1
    for _ in range(300):  # orjson stops at 254 levels
        deep = [deep]
    assert ours(deep) == drf(deep)
    assert ours({"n": 2**100}) == drf({"n": 2**100})


@pytest.mark.parametrize("media_type", ["application/json; indent=4", "application/json; indent=0", None])
def test_pretty_printing_is_drfs(media_type: str | None) -> None:
    assert ours(SAME["nested"], media_type) == drf(SAME["nested"], media_type)
    assert ours(None, media_type) == drf(None, media_type) == b""


@pytest.mark.parametrize(
    "value",
    [datetime.time(10, 0, tzinfo=UTC), object(), Plain.A, Point(1), "\ud800"],
    ids=["aware time", "object", "enum", "dataclass", "lone surrogate"],
)
def test_what_drf_refuses_is_refused_alike(value: Any) -> None:
    with pytest.raises(Exception) as refused:
        drf({"value": value})
    if value is Plain.A:
        # orjson writes an enum's value where DRF's encoder has nothing for it: not in these views
        # (their choices are TextChoices, str subclasses, written as their value by both)
        assert ours({"value": value}) == b'{"value":"a"}'
        return
    with pytest.raises(type(refused.value)):
        ours({"value": value})


def test_the_mirrored_kinds_views_render_with_it_and_drfs_other_renderers_stay() -> None:
    assert InferenceModelViewSet.renderer_classes[0] is JSONRenderer
    assert InferenceModelViewSet.renderer_classes[1:] == [renderers.BrowsableAPIRenderer]


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(),
        st.datetimes(timezones=st.sampled_from([UTC, zoneinfo.ZoneInfo("Asia/Kolkata")])),
    ),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=40,
)


@settings(max_examples=500, deadline=None)
@given(json_values)
def test_any_value_renders_as_drf_renders_it(value: Any) -> None:
    assert ours(value) == drf(value)


def test_floats_of_every_magnitude_render_as_drf_renders_them() -> None:
    """Each alone: one float that sends a page to DRF's renderer would hide another's difference."""
    floats = [sign * mantissa * 10.0**exponent for sign in (1, -1) for mantissa in (1, 1.5, 2.2250738585072014, 9.99)
              for exponent in range(-320, 309) if math.isfinite(mantissa * 10.0**exponent)]  # fmt: skip
    for number in floats:
        assert ours({"x": [number]}) == drf({"x": [number]}), number
