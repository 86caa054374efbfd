"""The admin's request records show measured floats rounded, with their unit (issue 43: a latency
read ``29.404337999949348``)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from governance.models import RequestRecord

pytestmark = pytest.mark.django_db


def test_request_record_latencies_are_milliseconds_to_a_tenth(admin_client) -> None:
    RequestRecord.objects.create(
        started_at=timezone.now(), team="vision", username="vera", model="vision/m", status=200,
        latency_ms=29.404337999949348, first_byte_ms=1234.56789,
    )  # fmt: skip
    RequestRecord.objects.create(
        started_at=timezone.now(), team="vision", username="vera", model="vision/m", status=502, latency_ms=3.0
    )
    body = admin_client.get("/admin/governance/requestrecord/").content.decode()
    assert "29.4 ms" in body and "1,234.6 ms" in body and "3.0 ms" in body
    assert "29.40433" not in body and "1234.567" not in body
    assert admin_client.get("/admin/governance/requestrecord/", {"o": "7"}).status_code == 200  # sorts by it
