"""Issue 43, "replica counts match the API", for KubeAI Models: KubeAI's autoscaler owns a Model's count
and writes what runs in ``status.replicas`` (``all``: its pods, ``ready``: those serving). The catalog
and the model page show those figures, not the spec's ``minReplicas`` (or ``replicas``), and nothing
where KubeAI has reported nothing yet. tests/devstack/test_journey.py checks the same against a live
cluster's objects."""

from __future__ import annotations

import re

import pytest

from tests.accounts.conftest import sample_in, store

pytestmark = pytest.mark.django_db


def catalog_cell(browser, obj) -> str:
    """The Replicas cell of ``obj``'s catalog row: the fifth after its name (cluster, pool, engine, readiness)."""
    body = browser.get("/models/", {"name": obj.name}).content.decode()
    row = re.search(rf'/models/kubeai-models/{obj.pk}/".*?</tr>', body, re.S).group(0)
    return re.findall(r"<td>(.*?)</td>", row, re.S)[4]


@pytest.mark.parametrize(("status", "shown", "on_page"), [
    ({"replicas": {"all": 3, "ready": 1}}, "3", "replicas 3 running (1 ready)"),  # more than minReplicas, one up
    ({"replicas": {"all": 0, "ready": 0}}, "0", "replicas 0 running (0 ready)"),  # scaled to zero
    ({}, "—", "replicas — running"),  # KubeAI has not reported: no count made up from the spec
])
def test_a_kubeai_models_replicas_are_what_kubeai_reports(world, status, shown, on_page):
    manifest = sample_in("Model", "vision", name="counted")
    manifest["spec"]["minReplicas"] = 2
    manifest["spec"]["maxReplicas"] = 5
    obj = store(world.cluster, manifest, status=status)
    browser = world.browser("staff")
    assert catalog_cell(browser, obj) == shown
    page = browser.get(f"/models/kubeai-models/{obj.pk}/").content.decode()
    assert on_page in re.sub(r"\s+", " ", page), page
