"""Every page and API list costs the same number of SQL queries whatever the number of rows.

Each case renders with a dataset (``bench.dataset``, the benchmarks' own) and with three times as
many rows in every table, for staff and for a team member, and asserts equal query counts: a
query per row (an N+1) or per namespace shows as a difference. Page sizes are not reached at the
small scale, so the larger one shows more rows on every list.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from bench.dataset import build

PAGES = ["/", "/models/", "/models/?ready=true&ordering=-memory_bytes", "/runs/", "/rightsizing/", "/planning/"]
API_LISTS = [
    "/api/inferencemodels/",
    "/api/inferencemodels/?q=model&ordering=name",
    "/api/kubeai-models/",
    "/api/modelservices/",
    "/api/inferenceconfigs/",
    "/api/inferenceruns/",
    "/api/clusters/",
    "/api/planning/pools/",
    "/api/rightsizing/report/",
]
ADMIN_LISTS = [
    "/admin/models_app/inferencemodel/",
    "/admin/models_app/kubeaimodel/",
    "/admin/models_app/modelservice/",
    "/admin/runs_app/inferenceconfig/",
    "/admin/runs_app/inferencerun/",
    "/admin/scheduler/nodepool/",
    "/admin/clusters/cluster/",
]
def _view_everything(user: User) -> User:
    """The model permissions the API and admin ask for (rows stay restricted to the user's teams)."""
    user.user_permissions.add(*Permission.objects.filter(codename__startswith="view_"))
    return User.objects.get(pk=user.pk)


def _count_queries(url: str, who: str, scale: int) -> int:
    """Queries of GET ``url`` as ``who`` over a dataset ``scale`` times the base size (rolled back after)."""
    with transaction.atomic():
        data = build(
            clusters=2,
            models_per_cluster=3 * scale,
            kubeai_models=2 * scale,
            model_services=2 * scale,
            runs=3 * scale,
            observations=2 * 6 * scale,
            analyze=False,
            member_rows=3 * scale,  # every namespace of the first cluster: the same grants at every scale
        )
        user = {"staff": data.staff, "member": data.member}[who]
        if who == "staff" and url.startswith("/admin/"):
            user.is_superuser = True
            user.save()
        client = Client()
        client.force_login(_view_everything(user))
        assert client.get(url).status_code == 200  # warm-up: per-process caches (content types...) fill
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == 200, response.content[:500]
        transaction.set_rollback(True)
    return len(queries)


CASES = [(url, who) for url in PAGES + API_LISTS for who in ("staff", "member")] + [
    (url, "staff") for url in ADMIN_LISTS
]


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "who"), CASES)
def test_query_count_does_not_grow_with_rows(url: str, who: str) -> None:
    small, large = _count_queries(url, who, 1), _count_queries(url, who, 3)
    assert large == small, f"GET {url} as {who}: {small} queries with N rows, {large} with 3N"
