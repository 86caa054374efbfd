"""The dashboard's tables say what their rows hold: the largest savings read as the report's
values (kind, object, pool, amounts; the history link), a cluster's last error cut at 80
characters and a dash where there is none, and a change shows on the next load."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from clusters.models import Cluster
from runs_app.models import InferenceRun
from scheduler.rightsizing.models import Observation, Refresh

GI = 1024**3
pytestmark = pytest.mark.django_db


def table_after(page: str, heading: str) -> str:
    return re.search(rf"<h2>{heading}</h2>\s*<table>(.*?)</table>", page, re.S)[1]


def savings_rows(client) -> list[str]:
    """The savings table's body rows, whitespace folded."""
    table = table_after(client.get("/").content.decode(), "Largest right-sizing savings")
    return [re.sub(r"\s+", " ", row) for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]]


def test_the_largest_savings_are_the_reports_rows_biggest_first(admin_client, cluster) -> None:
    refresh = Refresh.objects.create(cluster=cluster, started_at=timezone.now(), window_seconds=3600)
    for object_id, name, freed in ((7, "m<1>", 2 * GI), (8, "big", 10 * GI), (9, "grows", -GI)):
        Observation.objects.create(
            refresh=refresh, cluster=cluster, kind="InferenceModel", object_id=object_id, namespace="ns", name=name,
            node_pool="gpu", observed_at=refresh.started_at, declared_bytes=80 * GI,
            recommended_bytes=80 * GI - freed, freed_bytes=freed,
        )  # fmt: skip
    assert savings_rows(admin_client) == [
        '<td><a href="/rightsizing/inferencemodels/8/">ns/big</a> <small>InferenceModel</small></td><td>gpu</td> '
        "<td>80.0 GiB</td><td>70.0 GiB</td><td>10.0 GiB</td>",
        '<td><a href="/rightsizing/inferencemodels/7/">ns/m&lt;1&gt;</a> <small>InferenceModel</small></td>'
        "<td>gpu</td> <td>80.0 GiB</td><td>78.0 GiB</td><td>2.0 GiB</td>",
    ]  # fmt: skip  # no growth among savings
    Observation.objects.filter(object_id=8).update(freed_bytes=0)
    assert [row[:54] for row in savings_rows(admin_client)] == [
        '<td><a href="/rightsizing/inferencemodels/7/">ns/m&lt;'
    ]


def test_a_clusters_last_error_is_cut_at_80_characters_and_none_is_a_dash(admin_client, cluster) -> None:
    Cluster.objects.create(name="quiet", auth_method=Cluster.AuthMethod.SNAPSHOT)
    cluster.last_error = "connection refused " * 10
    cluster.save()
    clusters = table_after(admin_client.get("/").content.decode(), "Clusters")
    assert f"<td>{('connection refused ' * 10)[:79]}…</td></tr>" in clusters
    assert clusters.count("<td>—</td></tr>") == 1  # the quiet one


def test_the_recent_runs_link_their_pages_newest_first(admin_client, cluster) -> None:
    spec = {"configRef": {"name": "cfg"}}
    old = InferenceRun.objects.create(cluster=cluster, namespace="ns", name="old", spec=spec,
                                      status={"phase": "Failed"})  # fmt: skip
    new = InferenceRun.objects.create(cluster=cluster, namespace="ns", name="new<1>", spec=spec)
    rows = re.findall(r"<tr>(.*?)</tr>", table_after(admin_client.get("/").content.decode(), "Recent runs"), re.S)[1:]
    assert [re.sub(r"<time .*?</time>", "AGE", re.sub(r"\s+", " ", row)) for row in rows] == [
        f'<td><a href="/runs/{new.pk}/">ns/new&lt;1&gt;</a></td><td>cfg</td> '
        '<td><span class="badge Pending">Pending</span></td><td>AGE</td>',
        f'<td><a href="/runs/{old.pk}/">ns/old</a></td><td>cfg</td> '
        '<td><span class="badge Failed">Failed</span></td><td>AGE</td>',
    ]
