"""In a real browser: a calculator preset to a pre-filled create form that saves, and a model's
right-sizing page with its usage over time (screenshots in test-artifacts/screenshots/)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from models_app.models import InferenceModel
from scheduler.rightsizing.models import Observation, Refresh
from scheduler.rightsizing.policy import evaluate
from tests.browser.test_portal_in_browser import log_in

pytestmark = pytest.mark.django_db(transaction=True)
GI = 1024**3


def test_calculator_result_to_a_prefilled_form(page, shoot, world):
    log_in(page, "vera")
    page.goto("/calculator/")
    page.select_option("#preset-pick", "llama-3.1-70b-instruct")
    page.click("form.preset-picker button")
    expect(page.locator("#id_parameters")).to_have_value("70.6B")
    page.fill("#id_context_length", "8192")
    page.click("#calculator button[type=submit]")
    expect(page.locator("#gpu-types")).to_contain_text("NVIDIA H100 80GB")
    shoot(page, "calculator-llama-70b")

    page.locator("#gpu-types tr", has_text="NVIDIA H100 80GB").get_by_role("link", name="InferenceModel").click()
    expect(page.locator("#id_model_name")).to_have_value("meta-llama/Llama-3.1-70B-Instruct")
    expect(page.locator("#id_memory")).to_have_value("135Gi")
    page.select_option("#id_cluster", "east")
    page.fill("#id_namespace", "vision")
    shoot(page, "calculator-prefilled-form")
    page.click("#object-form button[type=submit]")
    expect(page.locator("h1")).to_contain_text("InferenceModel vision/llama-3-1-70b-instruct")
    saved = InferenceModel.objects.get(name="llama-3-1-70b-instruct")
    assert saved.spec["resources"]["limits"]["gpu"] == "2"


def test_rightsizing_model_page_plots_the_week(page, shoot, world):
    model = world.objects[("InferenceModel", "vision")]
    end = datetime(2026, 11, 20, tzinfo=UTC)
    for day, peak in enumerate([70, 72, 71, 74, 73, 72, 75]):
        at = end - timedelta(days=6 - day)
        refresh = Refresh.objects.create(cluster=world.cluster, started_at=at, window_seconds=604800, ok=True)
        verdict = evaluate(80 * GI, peak * GI)
        Observation.of(
            model, refresh=refresh, observed_at=at, is_latest=day == 6, samples=1440 * (day + 1),
            declared_bytes=80 * GI, peak_bytes=peak * GI, recommended_bytes=verdict.recommended_bytes,
            freed_bytes=verdict.freed_bytes, recommendation=verdict.recommendation,
        ).save()  # fmt: skip
    log_in(page, "vera")
    page.goto(f"/rightsizing/models/{model.pk}/")
    expect(page.locator("ul.findings")).to_contain_text("Consider reducing memory from 80Gi to 78Gi")
    expect(page.locator("figure.chart svg")).to_have_count(1)
    expect(page.locator("figure.chart")).to_contain_text(re.compile(r"\b0\b"))  # the axis starts at zero
    shoot(page, "rightsizing-model-week")
