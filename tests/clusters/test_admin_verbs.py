"""The admin as platform staff use it: quantities as Kubernetes quantities, namespaces and managed
kinds as widgets, "sync now" and "test connection" (against the real control plane), and the
ready-made groups that make a new user one click from working."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from clusters.models import AuditEntry, Cluster
from clusters.sync.audit import Actor, record
from devstack.ports import free_port
from models_app.models import InferenceModel
from scheduler.models import NodePool
from tests.accounts.conftest import sample_in, store
from tests.clusters.conftest import sample_manifest

GI = 1024**3


@pytest.fixture
def staff(db) -> Client:
    browser = Client()
    browser.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return browser


def page(response) -> str:
    assert response.status_code == 200, response.status_code
    return html.unescape(response.content.decode())


def messages_of(response) -> list[str]:
    return re.findall(r'<li class="(?:success|error|warning)">(.*?)</li>', page(response))


def test_pool_memory_is_shown_and_entered_as_quantities(staff, cluster) -> None:
    pool = NodePool.objects.create(cluster=cluster, name="gpu", allocatable_bytes=96 * GI, budget_bytes=80 * GI,
                                   gpu_memory_bytes=80 * GI)  # fmt: skip
    listed = page(staff.get("/admin/scheduler/nodepool/"))
    assert "96Gi" in listed and "80Gi" in listed and str(96 * GI) not in listed
    url = f"/admin/scheduler/nodepool/{pool.pk}/change/"
    form = page(staff.get(url))
    assert 'name="budget_bytes" value="80Gi"' in form and "GPU memory" in form
    fields = {"cluster": cluster.pk, "name": "gpu", "source": "manual", "node_count": 2, "gpu_count": 8,
              "allocatable_bytes": "96Gi", "largest_node_bytes": "48Gi", "gpu_memory_bytes": "80Gi",
              "budget_bytes": "100G", "nodes-TOTAL_FORMS": 0, "nodes-INITIAL_FORMS": 0}  # fmt: skip
    refused = page(staff.post(url, {**fields, "budget_bytes": "12 bananas"}))
    assert "'12 bananas' is not a Kubernetes quantity" in refused
    assert "'1.5' is not a whole number of bytes" in page(staff.post(url, {**fields, "budget_bytes": "1.5"}))
    assert staff.post(url, fields).status_code == 302
    pool.refresh_from_db()
    assert (pool.budget_bytes, pool.largest_node_bytes) == (100 * 10**9, 48 * GI)
    assert staff.post(url, {**fields, "budget_bytes": ""}).status_code == 302  # empty: allocatable is the budget
    pool.refresh_from_db()
    assert pool.budget_bytes is None


def test_model_memory_is_a_quantity_and_history_is_yaml_in_the_admin(staff, cluster) -> None:
    model = store(cluster, sample_in("InferenceModel", "vision"))
    listed = page(staff.get("/admin/models_app/inferencemodel/"))
    assert f"{model.memory_bytes // GI}Gi" in listed and str(model.memory_bytes) not in listed
    changes = [{"path": "spec.nodeSelector", "old": {"pool": "a"}, "new": {"pool": "b"}}]
    record(model, AuditEntry.Action.UPDATED, Actor("vera", AuditEntry.Source.PORTAL), changes)
    change_page = page(staff.get(f"/admin/models_app/inferencemodel/{model.pk}/change/"))
    assert f"{model.memory_bytes // GI}Gi" in change_page
    assert "<code>spec.nodeSelector</code>" in change_page and "<pre>pool: b</pre>" in change_page
    assert "{'pool'" not in change_page


def test_namespaces_and_managed_kinds_are_widgets(staff, cluster) -> None:
    url = f"/admin/clusters/cluster/{cluster.pk}/change/"
    form = page(staff.get(url))
    assert '<textarea name="namespaces"' in form and 'type="checkbox" name="managed_kinds" value="InferenceRun"' in form
    fields = {"name": "prod", "auth_method": "token", "server_url": "https://10.0.0.1:6443",
              "request_timeout_seconds": 10, "namespaces": "vision\nnlp, vision",
              "managed_kinds": ["InferenceRun"]}  # fmt: skip
    assert staff.post(url, fields).status_code == 302
    cluster.refresh_from_db()
    assert cluster.namespaces == ["vision", "nlp"] and cluster.managed_kinds == ["InferenceRun"]
    assert "vision\nnlp</textarea>" in page(staff.get(url))
    refused = page(staff.post(url, {**fields, "namespaces": "vision\nBad_NS"}))
    assert "'Bad_NS': a namespace name is at most 63 lowercase letters" in refused
    wrong = page(staff.post(url, {**fields, "managed_kinds": ["Deployment"]}))
    assert "Select a valid choice. Deployment is not one of the available choices." in wrong
    cluster.refresh_from_db()
    assert cluster.namespaces == ["vision", "nlp"] and cluster.managed_kinds == ["InferenceRun"]


def act(staff: Client, action: str, *clusters: Cluster):
    return staff.post(
        "/admin/clusters/cluster/", {"action": action, "_selected_action": [c.pk for c in clusters]}, follow=True
    )


def test_test_connection_and_sync_now_on_the_real_control_plane(staff, kube) -> None:
    live = kube.register()
    kube.write(sample_manifest("inferencemodel-mistral-7b.yaml", kube.namespace))
    unreachable = Cluster.objects.create(name="gone", server_url=f"https://127.0.0.1:{free_port()}",
                                         bearer_token="t", request_timeout_seconds=2)  # fmt: skip
    snapshot = Cluster.objects.create(name="demo", auth_method=Cluster.AuthMethod.SNAPSHOT)
    said = messages_of(act(staff, "test_connection", live, unreachable, snapshot))
    ok = next(message for message in said if message.startswith("Test:"))
    assert ok.startswith("Test: connected to Kubernetes v") and "lists InferenceModel, Model, ModelService" in ok
    assert any(re.match(r"Gone: cannot connect: connection failed: .*Connection refused", m) for m in said), said
    assert "Demo: cannot connect: it is a snapshot (demo data, no API server to connect to)" in said

    assert not InferenceModel.objects.filter(cluster=live).exists()
    said = messages_of(act(staff, "sync_now", live, snapshot))
    assert any(message.startswith("Sync started for test:") for message in said)
    assert "Not synced: demo (snapshots have no API server)." in said
    assert InferenceModel.objects.get(cluster=live).name == "mistral-7b"  # the task ran (eager in tests)
    live.refresh_from_db()
    assert live.healthy and live.last_full_resync_at is not None
