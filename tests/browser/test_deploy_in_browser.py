"""Guided deploy in Chromium: from the catalog, a preset, the pool chosen from what fits, the YAML
and the what-if reviewed, then applied and shown on the model's page."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from models_app.models import InferenceModel
from tests.browser.test_portal_in_browser import log_in
from tests.conftest import ALL_KIND_PERMS

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_member_deploys_a_preset_on_the_pool_that_fits(page, shoot, make_user):
    call_command("load_demo", stdout=io.StringIO())
    make_user("deployer", perms=ALL_KIND_PERMS)
    log_in(page, "deployer")
    page.click('header a:text-is("Models")')
    page.click("#deploy-link")
    expect(page.locator("h1")).to_have_text("Deploy a model")
    expect(page.locator("#id_cluster")).to_have_value("demo")  # the only cluster, chosen
    page.select_option("#id_preset", "llama-3.1-8b-instruct")
    page.fill("#id_namespace", "default")
    page.click("#deploy-form button[value=review]")
    expect(page.locator("#deploy-pools")).to_contain_text("demo/gpu-a100")
    page.locator("#deploy-pools tr", has_text="demo/gpu-a100").locator("button.use-pool").click()
    expect(page.locator("#deploy-yaml")).to_contain_text("inference-pool: gpu-a100")
    memory = re.search(r"memory: (\d+Gi)", page.locator("#deploy-yaml").inner_text())[1]
    expect(page.locator("#deploy-estimate")).to_contain_text(memory)
    expect(page.locator("#deploy-plan")).to_contain_text("fits")
    shoot(page, "deploy-review")
    page.click("#deploy-apply")
    expect(page.locator("h1")).to_contain_text("InferenceModel default/llama-3-1-8b-instruct")
    expect(page.locator("#spec")).to_contain_text(f"memory: {memory}")
    assert InferenceModel.objects.get(name="llama-3-1-8b-instruct").node_pool == "gpu-a100"
