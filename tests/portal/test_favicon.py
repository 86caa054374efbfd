"""Every page has an icon (issue 43: every page asked for a missing /favicon.ico, a 404 each)."""

from __future__ import annotations

import pytest
from django.contrib.staticfiles import finders
from django.templatetags.static import static
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_portal_pages_name_the_icon_and_others_find_it_at_favicon_ico() -> None:
    client = Client()
    login = client.get("/login/").content.decode()
    assert f'<link rel="icon" href="{static("portal/favicon.svg")}"' in login
    answer = client.get("/favicon.ico")  # the admin's and the API docs' pages name none: browsers ask here
    assert (answer.status_code, answer["Location"]) == (301, static("portal/favicon.svg"))
    assert finders.find("portal/favicon.svg") is not None
