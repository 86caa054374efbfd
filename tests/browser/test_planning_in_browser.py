"""Planning in a real browser: pick models in the catalog, plan them, see each node's bar of memory
and GPU memory filled by its models (the placement chart), on the demo's GPU pools."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from tests.browser.test_portal_in_browser import log_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_models_picked_in_the_catalog_are_planned_with_a_placement_chart(page, shoot, make_user):
    call_command("load_demo", stdout=io.StringIO())
    make_user("planner", staff=True)
    page.goto("/login/")
    page.fill("#id_username", "planner")
    page.fill("#id_password", "pw-for-tests")
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Dashboard")
    expect(page.locator("strong.over")).to_have_count(0)  # no demo pool is over its budget

    page.click('header a:text-is("Models")')
    row = page.locator("#catalog tbody tr", has_text="codellama-34b")
    expect(row).to_contain_text("nvidia")  # GPUs and accelerator in the catalog
    row.locator("input[name=pick]").check()
    page.click("text=What if…")
    expect(page.locator("h1")).to_have_text("Memory planning")
    expect(page.locator("#id_models")).to_have_value(re.compile(r"kind: InferenceModel\n\s*id: \d+"))
    page.click("button:text-is('Plan')")
    expect(page.locator("#plan")).to_contain_text("the proposal fits", timeout=30_000)  # a loaded 2-core machine
    chart = page.locator("figure.chart svg", has_text="Placement: memory and GPU memory of each node")
    expect(chart).to_be_visible()
    expect(chart).to_contain_text("gpu-a100/gpu-a100-node-1 GPUs")
    chart.scroll_into_view_if_needed()
    shoot(page, "planning-placement")


def test_the_what_if_chooser_finds_models_by_name_and_pool_and_plans_them(page, shoot, make_user):
    call_command("load_demo", stdout=io.StringIO())
    make_user("planner", staff=True)
    log_in(page, "planner")
    page.goto("/planning/")
    expect(page.locator("#what-if-yaml")).not_to_have_attribute("open", "")  # the YAML is the advanced path
    page.fill("#whatif-q", "llama")
    page.select_option("#whatif-pool", "gpu-a100")
    page.click("#whatif-search button[type=submit]")
    rows = page.locator("#whatif-models tbody tr")
    expect(rows.first).to_contain_text("gpu-a100")
    expect(page.locator("#whatif-models")).not_to_contain_text("gpu-l4")  # the pool filter holds
    page.locator("#whatif-models tr", has_text="llama-2-7b").locator("input[name=pick]").check()
    page.fill("#whatif-q", "codellama")  # a second search keeps what is ticked
    page.click("#whatif-search button[type=submit]")
    expect(page.locator("#whatif-models tr.picked")).to_contain_text("llama-2-7b")
    page.locator("#whatif-models tr", has_text="codellama-34b").locator("input[name=pick]").check()
    page.click("#whatif-plan")
    expect(page.locator("#plan")).to_contain_text("the proposal fits", timeout=30_000)
    expect(page.locator("#plan + p")).to_contain_text("llama-2-7b")
    expect(page.locator("#plan + p")).to_contain_text("codellama-34b")
    shoot(page, "planning-what-if-chooser")
