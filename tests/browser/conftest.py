"""One headless Chromium per session (Debian's ``chromium``, driven by Playwright; never downloaded)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings

from tests.accounts.conftest import sso_provider, world  # noqa: F401 - fixtures

SCREENSHOTS = Path(settings.BASE_DIR) / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]  # fmt: skip


@contextmanager
def open_chromium() -> Iterator:
    """A headless Chromium until the block ends. Playwright's sync API keeps an event loop running
    on this thread while it is open, and every later ``asyncio.run`` on the thread (the gateway's
    and the limits' tests) would be refused: a fixture holding it ends with the tests that need it."""
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail("Debian's chromium is not installed (.ci/setup.d/chromium.sh installs it)")
    from playwright.sync_api import sync_playwright

    # The test's own ORM calls stay synchronous beside Playwright's loop, so Django's async-safety
    # guard is lifted while the browser is open, and put back after.
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@pytest.fixture(scope="package")
def browser() -> Iterator:
    """One Chromium for the browser tests, closed when the run leaves tests/browser/."""
    with open_chromium() as chromium:
        yield chromium


@pytest.fixture
def page(browser, live_server, transactional_db):
    """A fresh browser context per test (its own cookies), with ``page.goto("/path")`` on the live server."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    tab = context.new_page()
    yield tab
    context.close()


@pytest.fixture
def shoot():
    """``shoot(page, "catalog")`` saves test-artifacts/screenshots/catalog.png (full page)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def save(tab, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        tab.screenshot(path=str(path), full_page=True)
        return path

    return save
