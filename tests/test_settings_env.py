"""Settings read from the environment: a bad value stops the process at start with its name, value
and rule, never later as a 500 on the request it breaks."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings

from config.settings.env import env_float


@pytest.mark.parametrize("raw", ["0", "-1", "nan", "four"])
def test_a_number_outside_its_rule_names_the_setting(monkeypatch, raw) -> None:
    monkeypatch.setenv("SOME_RATE", raw)
    with pytest.raises(ValueError, match=r"SOME_RATE="):
        env_float("SOME_RATE", 4.0, above=0)


@pytest.mark.parametrize(("raw", "allowed"), [("0", True), ("0.25", True), ("-0.1", False), ("nan", False)])
def test_at_least_admits_its_bound_and_refuses_below_it(monkeypatch, raw, allowed) -> None:
    monkeypatch.setenv("SOME_SECONDS", raw)
    if allowed:
        assert env_float("SOME_SECONDS", 1.0, at_least=0) == float(raw)
    else:
        with pytest.raises(ValueError, match=r"SOME_SECONDS=.* must be a number of at least 0"):
            env_float("SOME_SECONDS", 1.0, at_least=0)


def test_a_number_is_read_and_an_unset_one_defaults(monkeypatch) -> None:
    monkeypatch.setenv("SOME_RATE", "2.5")
    assert env_float("SOME_RATE", 4.0, above=0) == 2.5
    monkeypatch.delenv("SOME_RATE")
    assert env_float("SOME_RATE", 4.0, above=0) == 4.0


def test_the_portal_refuses_to_start_with_a_reservation_divisor_of_zero() -> None:
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=settings.BASE_DIR, capture_output=True,
                            text=True, env={**os.environ, "USAGE_RESERVE_BYTES_PER_TOKEN": "0"})  # fmt: skip
    assert result.returncode != 0
    assert "USAGE_RESERVE_BYTES_PER_TOKEN='0' must be a number greater than 0" in result.stderr
