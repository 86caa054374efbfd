"""The portal's answers in Chromium: a filter that matches nothing, the catalog at 1400 px, ages
with the exact time on hover, the portal's own 404 page for another team's object."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings
from playwright.sync_api import expect

from tests.browser.test_portal_in_browser import log_in

pytestmark = pytest.mark.django_db(transaction=True)
EXACT = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$")


def test_catalog_at_1400_px_shows_every_column_and_an_empty_page_for_no_match(page, shoot, world):
    page.set_viewport_size({"width": 1400, "height": 900})
    log_in(page, "vera")
    page.click('header a:text-is("Models")')
    expect(page.locator("#catalog tbody tr")).to_have_count(3)
    box = page.locator(".table-scroll")
    overflow = box.evaluate("box => box.scrollWidth - box.clientWidth")
    assert overflow <= 1, f"the catalog scrolls by {overflow}px at 1400 px"
    expect(page.locator(".scroll-hint")).to_be_hidden()
    shoot(page, "catalog-1400")
    page.set_viewport_size({"width": 700, "height": 900})  # narrower: the scroll is marked, never silent
    expect(page.locator(".scroll-hint")).to_be_visible()
    expect(box).to_have_class(re.compile("scrolls"))

    page.fill("input[name=q]", "nomatch")
    page.click("#catalog-filters button[type=submit]")
    expect(page.locator("#catalog tbody")).to_have_text("No model matches.")
    page.goto("/models/?node_pool=nonexistent")
    expect(page.locator("#catalog tbody")).to_have_text("No model matches.")


def test_timestamps_read_as_ages_with_the_exact_time_on_hover(page, world):
    log_in(page, "vera")
    model = world.objects[("InferenceModel", "vision")]
    page.goto(f"/models/inferencemodels/{model.pk}/edit/")
    page.fill("#id_memory", "64Gi")
    page.click("#object-form button[type=submit]")  # an audited change
    expect(page.locator("h1")).to_contain_text("InferenceModel vision/")
    moment = page.locator("#audit time").first
    expect(moment).to_have_text(re.compile(r"^(just now|\d+\s\w+ ago)$"))
    assert EXACT.match(moment.get_attribute("title"))
    moment.hover()  # the browser shows the title as the tooltip
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", page.locator("main").inner_text())


@override_settings(DEBUG=True)
def test_another_teams_object_shows_the_portals_not_found_page(page, world):
    log_in(page, "vera")
    response = page.goto(f"/models/inferencemodels/{world.objects[('InferenceModel', 'nlp')].pk}/")
    assert response.status == 404
    expect(page.locator("h1")).to_have_text("Not found")
    expect(page.locator("body")).not_to_contain_text("URLconf")
