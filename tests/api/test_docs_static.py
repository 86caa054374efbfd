"""Swagger UI and ReDoc come from the portal's own static files: no CDN, so the docs work offline."""

from __future__ import annotations

import re

import pytest
from django.contrib.staticfiles import finders

pytestmark = pytest.mark.django_db

ASSET = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|["']([^"'\s]+\.(?:js|css|png))["']""")


@pytest.mark.parametrize("url", ["/api/docs/", "/api/redoc/"])
def test_docs_page_references_only_local_static_files(url, client, make_user) -> None:
    client.force_login(make_user("reader"))
    page = client.get(url).content.decode()
    assets = {first or second for first, second in ASSET.findall(page)}
    scripts = {asset for asset in assets if asset.endswith(".js")}
    assert scripts, f"{url} loads no script: {page[:500]}"
    for asset in assets:
        assert not re.match(r"^(?:[a-z]+:)?//", asset), f"{url} loads {asset} from another host"
    for script in scripts:
        assert script.startswith("/static/") and finders.find(script.removeprefix("/static/")), script
