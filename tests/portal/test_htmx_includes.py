"""What a template's ``hx-include`` names always exists: the id of an element of the same template
(issue 43: the what-if chooser's "ticked boxes" selector matched nothing until one was ticked, and
htmx logged "hx-include returned no matches" on the planning page)."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

TEMPLATES = Path(settings.BASE_DIR) / "templates"


def test_every_hx_include_names_an_element_of_its_template() -> None:
    found = 0
    for template in TEMPLATES.rglob("*.html"):
        text = template.read_text()
        for selector in re.findall(r'hx-include="([^"]*)"', text):
            found += 1
            assert re.fullmatch(r"#[\w-]+", selector), f"{template}: hx-include={selector!r} is not one element's id"
            assert f'id="{selector[1:]}"' in text, f"{template}: no element has id {selector[1:]!r}"
    assert found, "no template includes anything: the test looks in the wrong place"
