"""Every chart goes through common.charts: inline SVG that links nothing from the internet."""

from __future__ import annotations

import re

import pygal
import pytest

from clusters.models import Cluster
from common.charts import chart, render
from tests.scheduler.conftest import make_model, make_pool

# a src or href to another host: pygal's default links kozea.github.io/pygal.js
EXTERNAL = re.compile(r"""(?:src|href)=["']?(?:https?:)?//""")


def test_a_chart_is_inline_svg_that_links_nothing_external():
    graph = chart(pygal.Bar, title="t")
    graph.add("a", [1, 2])
    svg = render(graph)
    assert svg.startswith("<svg")
    assert not EXTERNAL.search(svg)


@pytest.mark.django_db
def test_the_dashboards_chart_links_nothing_external(admin_client):
    cluster = Cluster.objects.create(name="c", server_url="https://10.0.0.9:6443")
    make_pool(cluster, "gpu", budget="64Gi", nodes=["64Gi"])
    make_model(cluster, "llama", "16Gi")
    page = admin_client.get("/").content.decode()
    assert "<svg" in page
    assert not EXTERNAL.search(page)
