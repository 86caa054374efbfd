"""The ledger's admin changelists count up to a bound (issue 41: at millions of request records,
Django's paginator and its full result count read every row twice on each page load) and still
walk every record once over their pages."""

from __future__ import annotations

import re

import pytest
from django.contrib import admin
from django.utils import timezone

from clusters.web import list_costs
from governance.models import RequestRecord

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/governance/requestrecord/"
ROW = re.compile(r'href="/admin/governance/requestrecord/(\d+)/change/')


def test_request_records_are_counted_up_to_the_bound_and_paged_whole(admin_client, monkeypatch) -> None:
    now = timezone.now()
    records = RequestRecord.objects.bulk_create(
        RequestRecord(started_at=now, team="vision", username="vera", model="vision/m", status=200, latency_ms=1.0)
        for _ in range(12)
    )
    monkeypatch.setattr(list_costs, "COUNT_BOUND", 10)
    monkeypatch.setattr(admin.site._registry[RequestRecord], "list_per_page", 5)
    first = admin_client.get(CHANGELIST).content.decode()
    assert "about " in first and "an estimate" in first
    seen = []
    for number in (1, 2, 3):
        seen += [int(pk) for pk in ROW.findall(admin_client.get(CHANGELIST, {"p": number}).content.decode())]
    assert sorted(seen) == sorted(record.pk for record in records) and len(seen) == len(set(seen))
