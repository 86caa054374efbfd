"""The mirrored kinds' API responses, byte for byte and with their headers, and the edit versions
(``metadata.resourceVersion``) clients hold and send back: recorded from the code before the list's
reading and writing were sped up (orjson for the JSON columns and the response, the cluster's name
joined), so a change in how they are computed cannot change what clients see. Recorded again when
``sync.gitops`` was added (null outside git mode, docs/gitops.md): an intended, additive field."""

from __future__ import annotations

import datetime
import hashlib

import pytest
from rest_framework.test import APIClient

from clusters.models import Cluster, SyncState
from models_app.models import InferenceModel

FIXED = datetime.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.UTC)
CONDITION = {"type": "Ready", "status": "False", "reason": "Waiting", "message": "no memory left in pool",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip


def _objects(cluster: Cluster) -> None:
    """Three rows of every shape a response has: non-ASCII and U+2028 in labels and annotations,
    floats that repr and orjson write differently, an integer past 64 bits, a conflict, a row
    being deleted, an empty one."""
    InferenceModel(
        pk=1001, cluster=cluster, namespace="team-a", name="alpha", uid="uid-alpha", generation=3,
        resource_version="77", sync_state=SyncState.SYNCED,
        labels={"team": "ml-platform", "note": "ünïcødé 😀"},
        annotations={"example.com/sep": "line\u2028break", "example.com/digits": "12345678901234567890"},
        spec={"modelName": "llama", "memory": "16Gi", "backendUrl": "http://vllm:8000", "ratio": 1.5e-05,
              "tiny": 2.5e-09, "huge": 2**70, "zero": -0.0, "nested": {"b": [1, 2.5, None, True], "a": "z"}},
        status={"ready": True, "replicas": 1, "conditions": [CONDITION]},
    ).save()  # fmt: skip
    InferenceModel(
        pk=1002, cluster=cluster, namespace="team-b", name="beta", sync_state=SyncState.CONFLICT,
        last_error="apply refused: 422", labels={"team": "b"},
        spec={"modelName": "mistral", "memory": "8Gi", "backendUrl": "http://m:8000"},
        conflict={"resourceVersion": "9", "spec": {"memory": "4Gi"}, "fields": [
            {"path": "spec.memory", "base": "2Gi", "portal": "8Gi", "cluster": "4Gi"}]},
    ).save()  # fmt: skip
    InferenceModel(pk=1003, cluster=cluster, namespace="team-a", name="gamma", sync_state=SyncState.DELETING).save()
    InferenceModel.objects.update(created_at=FIXED, updated_at=FIXED, cluster_created_at=FIXED)


EDIT_VERSIONS = {"alpha": "4bf2b1986e5f59179fe3", "beta": "e62ff504050869965dcc", "gamma": "fc3cc5527d558e1bb926"}

# sha256 of each response's bytes, by URL, and of the page the first page's next link gives.
RESPONSES = {
    "/api/inferencemodels/?limit=2&ordering=name": (
        "96ebdf7d596e8db6c96648bd69b3c642336e7c7123e2a00cf63875fc0ab234c4"
    ),
    "/api/inferencemodels/?limit=2&offset=1&ordering=name": (
        "d67472271add75f11959922c646eff53012e40d372ab67a0eb6df97edd0b61cc"
    ),
    "/api/inferencemodels/?limit=2": "a0f796601da6fea272e4ecc8050dd482a9ab8ac8aa45b235f8eb3086f434a80d",
    "/api/inferencemodels/?limit=2&ordering=-updated_at": (
        "02e93fe7081dadc641b0f47b0ec8522e983dd42244b1cf78fa2a488e5cfe34d0"
    ),
    "/api/inferencemodels/1001/": "8bc9be783a524095cfe5d18e7d2e743dc6919d7a9c43caa9d3282265a6e5f50a",
    "/api/inferencemodels/1002/": "55a2104d047b17d6e05ac65c80495ca5452926aaec4b87c4ed45acd0a7dd95db",
}
NEXT_PAGE = "ab5b9e8c3f97113267beb90d2b7991ab68dcc98b380e1180cfeeaf231905e32d"
FIRST_PAGE = (
    b'{"count":3,"count_estimated":false,"next":"http://testserver/api/inferencemodels/?cursor=eyJvcmR'
    b'lciI6IFsibmFtZSIsICJuYW1lc3BhY2UiLCAicGsiXSwgImJlZm9yZSI6IGZhbHNlLCAidmFsdWVzIjogWyJiZXRhIiwgInR'
    b'lYW0tYiIsIDEwMDJdfQ&limit=2&ordering=name","previous":null,"results":[{"id":1001,"cluster":"prod'
    b'","apiVersion":"inference.eh-ops.io/v1alpha1","kind":"InferenceModel","metadata":{"name":"alpha"'
    b',"namespace":"team-a","uid":"uid-alpha","resourceVersion":"4bf2b1986e5f59179fe3","generation":3,'
    b'"creationTimestamp":"2026-01-02T03:04:05Z","labels":{"note":"\xc3\xbcn\xc3\xafc\xc3\xb8d\xc3\xa9'
    b' \xf0\x9f\x98\x80","team":"ml-platform"},"annotations":{"example.com/sep":"line\\u2028break","example.com'
    b'/digits":"12345678901234567890"}},"spec":{"huge":1180591620717411303424,"tiny":2.5e-09,"zero":0.'
    b'0,"ratio":1.5e-05,"memory":"16Gi","nested":{"a":"z","b":[1,2.5,null,true]},"modelName":"llama","'
    b'backendUrl":"http://vllm:8000"},"status":{"ready":true,"replicas":1,"conditions":[{"type":"Ready'
    b'","reason":"Waiting","status":"False","message":"no memory left in pool","lastTransitionTime":"2'
    b'026-01-01T00:00:00Z"}]},"lastError":null,"sync":{"state":"Synced","lastError":"","updatedAt":"20'
    b'26-01-02T03:04:05.678901Z","resourceVersion":"77","conflict":null,"gitops":null},"summary":{"mod'
    b'el_name":"llama","engine":"","node_pool":"default","memory_bytes":17179869184,"replicas":1,"gpu_'
    b'count":0,"ready":true,"accelerator":"","phase":"Waiting","running_replicas":1,"pods":[{"gpus":0,'
    b'"role":"server","count":1,"running":1,"cpu_millis":0,"accelerator":"","gpu_product":"","memory_b'
    b'ytes":17179869184,"gpu_memory_bytes":0}],"last_active_at":null,"cooldown_seconds":600,"observed_'
    b'peak_bytes":null,"utilization_percent":null}},{"id":1002,"cluster":"prod","apiVersion":"inferenc'
    b'e.eh-ops.io/v1alpha1","kind":"InferenceModel","metadata":{"name":"beta","namespace":"team-b","re'
    b'sourceVersion":"e62ff504050869965dcc","creationTimestamp":"2026-01-02T03:04:05Z","labels":{"team'
    b'":"b"}},"spec":{"memory":"8Gi","modelName":"mistral","backendUrl":"http://m:8000"},"status":{},"'
    b'lastError":{"reason":"SyncError","message":"apply refused: 422","since":"2026-01-02T03:04:05Z"},'
    b'"sync":{"state":"Conflict","lastError":"apply refused: 422","updatedAt":"2026-01-02T03:04:05.678'
    b'901Z","resourceVersion":"","conflict":{"spec":{"memory":"4Gi"},"fields":[{"base":"2Gi","path":"s'
    b'pec.memory","portal":"8Gi","cluster":"4Gi"}],"resourceVersion":"9"},"gitops":null},"summary":{"m'
    b'odel_name":"mistral","engine":"","node_pool":"default","memory_bytes":8589934592,"replicas":1,"g'
    b'pu_count":0,"ready":false,"accelerator":"","phase":"","running_replicas":null,"pods":[{"gpus":0,'
    b'"role":"server","count":1,"running":1,"cpu_millis":0,"accelerator":"","gpu_product":"","memory_b'
    b'ytes":8589934592,"gpu_memory_bytes":0}],"last_active_at":null,"cooldown_seconds":600,"observed_p'
    b'eak_bytes":null,"utilization_percent":null}}]}'
)
HEADERS = {
    "Content-Type": "application/json",
    "Vary": "Accept",
    "Allow": "GET, POST, HEAD, OPTIONS",
    "X-Frame-Options": "DENY",
    "Content-Length": "2802",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}


@pytest.fixture
def staff(make_user) -> APIClient:
    client = APIClient()
    client.force_authenticate(make_user("staff", staff=True))
    return client


@pytest.mark.django_db
def test_edit_versions_stay_as_recorded(cluster: Cluster) -> None:
    _objects(cluster)
    assert {row.name: row.edit_version() for row in InferenceModel.objects.all()} == EDIT_VERSIONS


@pytest.mark.django_db
def test_responses_stay_byte_for_byte_as_recorded(cluster: Cluster, staff: APIClient) -> None:
    _objects(cluster)
    first = staff.get("/api/inferencemodels/?limit=2&ordering=name")
    assert first.content == FIRST_PAGE
    assert dict(first.headers.items()) == HEADERS
    assert {url: hashlib.sha256(staff.get(url).content).hexdigest() for url in RESPONSES} == RESPONSES
    assert hashlib.sha256(staff.get(first.json()["next"]).content).hexdigest() == NEXT_PAGE
