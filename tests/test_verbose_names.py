"""Every model of the project reads right in the admin: its acronyms as written (GPU, API), and
plurals English makes (issue 43: "Gpu prices", "Api tokens", "External identitys", "Refreshs")."""

from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.conf import settings

ACRONYMS = ("gpu", "api", "oidc", "yaml", "url")  # a word of a verbose name that must be upper case
PROJECT_APPS = {config.label for config in apps.get_app_configs()
                if (settings.BASE_DIR / config.name.split(".")[0]).is_dir()}


def project_models() -> list:
    return [model for model in apps.get_models() if model._meta.app_label in PROJECT_APPS]


@pytest.mark.parametrize("model", project_models(), ids=lambda model: f"{model._meta.label}")
def test_verbose_names_spell_acronyms_and_plurals(model) -> None:
    for name in (str(model._meta.verbose_name), str(model._meta.verbose_name_plural)):
        words = re.findall(r"[A-Za-z]+", name)
        wrong = [word for word in words if word.lower().rstrip("s") in ACRONYMS and not word.rstrip("s").isupper()]
        assert not wrong, f"{model._meta.label}: {name!r} spells {wrong} in lower case"
    plural = str(model._meta.verbose_name_plural)
    assert not re.search(r"([^aeiou]ys|shs|chs|sss|xs)$", plural), f"{model._meta.label}: plural {plural!r}"


def test_the_project_has_models_to_check() -> None:
    assert {"governance", "accounts", "rightsizing"} <= PROJECT_APPS and len(project_models()) > 20
