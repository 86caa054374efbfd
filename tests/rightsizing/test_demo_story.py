"""The demo tells one story: the same saving on the model page, the report, planning and the dashboard."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.test import Client

from models_app.models import InferenceModel
from scheduler.admission.accounting import pool_accounts
from scheduler.rightsizing.models import Observation

pytestmark = pytest.mark.django_db
GI = 1024**3
EXAMPLE = "Consider reducing memory from 80Gi to 78Gi (observed peak 75Gi, 6% overprovisioned)"


def test_one_saving_on_every_page(make_user):
    call_command("load_demo", stdout=io.StringIO())
    llama = InferenceModel.objects.get(name="llama-2-70b")
    history = list(Observation.objects.filter(kind="InferenceModel", object_id=llama.pk).order_by("observed_at"))
    assert len(history) == 7 and history[-1].is_latest and history[-1].recommendation == EXAMPLE
    assert llama.status["recommendation"] == EXAMPLE and llama.status["observedPeakMemory"] == "75Gi"

    # planning counts the models holding memory now (codellama-34b is scaled to zero): the same
    # per-model saving as the report's, summed over those
    latest = Observation.objects.filter(is_latest=True, kind="InferenceModel")
    running = {model.pk for model in InferenceModel.objects.all() if model.status.get("replicas")}
    freed = {pool: 0 for pool in latest.values_list("node_pool", flat=True)}
    for observation in latest:
        if observation.object_id in running:
            freed[observation.node_pool] += max(0, observation.freed_bytes or 0)
    assert freed["gpu-a100"] == 3 * GI  # llama-2-70b 80 -> 78Gi, llama-2-7b 16 -> 15Gi
    planned = {account.pool: account.rightsizing_savings_bytes for account in pool_accounts()}
    assert all(planned.get(pool, 0) == amount for pool, amount in freed.items()), (planned, freed)

    client = Client()
    client.force_login(make_user("viewer"))
    home = client.get("/").content.decode()
    assert "No saving found" not in home and "llama-2-70b" in home
    report = client.get("/rightsizing/").content.decode()
    assert EXAMPLE in report and "No observations" not in report
    page = client.get(f"/rightsizing/models/{llama.pk}/").content.decode()
    assert EXAMPLE in page and page.count("<svg") == 2  # memory and GPU memory over the week
