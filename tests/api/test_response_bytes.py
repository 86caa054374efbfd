"""The mirrored kinds' API responses, byte for byte and with their headers, and the edit versions
(``metadata.resourceVersion``) clients hold and send back: recorded from the code before the list's
reading and writing were sped up (orjson for the JSON columns and the response, the cluster's name
joined), so a change in how they are computed cannot change what clients see."""

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
    "/api/inferencemodels/?limit=2&ordering=name": ("d46143fd8594a99f6f5b716926bbea5e21a298452628433cbc87849dab455333"),
    "/api/inferencemodels/?limit=2&offset=1&ordering=name": (
        "dc7696b04aa4db45ea19cbe06bcb565f16a6c3f36a9dd2672abdfa68a4286925"
    ),
    "/api/inferencemodels/?limit=2": "a0f9fe7930f27acb7ccd47c8d2123e65586a269fb8c153631666968f1ae22626",
    "/api/inferencemodels/?limit=2&ordering=-updated_at": (
        "f104ec93b5bcdcdb66b1e922e7f7dd76659efebe089475e334f59723c15ca1bf"
    ),
    "/api/inferencemodels/1001/": "3d7598eb765a5ee76937e86f25ab6de3ad227b27eca8fbcf0b53ca735488053a",
    "/api/inferencemodels/1002/": "29b8b0d6ed3074fe68481d562ca9e26ef142a87a515a88c2d11fdd04824f8c96",
}
NEXT_PAGE = "8ffa5f679faafb1465dac8e4a76e72b99030a57e50964a2e9e920979e027f6af"
FIRST_PAGE = (
    b'{"count":3,"count_estimated":false,"next":"http://testserver/api/inferencemodels/?cursor=eyJvcmRl'
    b"ciI6IFsibmFtZSIsICJuYW1lc3BhY2UiLCAicGsiXSwgImJlZm9yZSI6IGZhbHNlLCAidmFsdWVzIjogWyJiZXRhIiwgInRlY"
    b'W0tYiIsIDEwMDJdfQ&limit=2&ordering=name","previous":null,"results":[{"id":1001,"cluster":"prod","'
    b'apiVersion":"inference.eh-ops.io/v1alpha1","kind":"InferenceModel","metadata":{"name":"alpha","na'
    b'mespace":"team-a","uid":"uid-alpha","resourceVersion":"4bf2b1986e5f59179fe3","generation":3,"crea'
    b'tionTimestamp":"2026-01-02T03:04:05Z","labels":{"note":"\xc3\xbcn\xc3\xafc\xc3\xb8d\xc3\xa9 \xf0\x9f\x98\x80'
    b'","team":"ml-platform"},"annotations":{"example.com/sep":"line\\u2028break","example.com/digits":'
    b'"12345678901234567890"}},"spec":{"huge":1180591620717411303424,"tiny":2.5e-09,"zero":0.0,"ratio":'
    b'1.5e-05,"memory":"16Gi","nested":{"a":"z","b":[1,2.5,null,true]},"modelName":"llama","backendUrl"'
    b':"http://vllm:8000"},"status":{"ready":true,"replicas":1,"conditions":[{"type":"Ready","reason":"'
    b'Waiting","status":"False","message":"no memory left in pool","lastTransitionTime":"2026-01-01T00:'
    b'00:00Z"}]},"lastError":null,"sync":{"state":"Synced","lastError":"","updatedAt":"2026-01-02T03:04'
    b':05.678901Z","resourceVersion":"77","conflict":null},"summary":{"model_name":"llama","engine":"",'
    b'"node_pool":"default","memory_bytes":17179869184,"replicas":1,"gpu_count":0,"ready":true,"acceler'
    b'ator":"","phase":"Waiting","running_replicas":1,"pods":[{"gpus":0,"role":"server","count":1,"runn'
    b'ing":1,"cpu_millis":0,"accelerator":"","gpu_product":"","memory_bytes":17179869184,"gpu_memory_by'
    b'tes":0}],"last_active_at":null,"cooldown_seconds":600,"observed_peak_bytes":null,"utilization_per'
    b'cent":null}},{"id":1002,"cluster":"prod","apiVersion":"inference.eh-ops.io/v1alpha1","kind":"Infe'
    b'renceModel","metadata":{"name":"beta","namespace":"team-b","resourceVersion":"e62ff504050869965dc'
    b'c","creationTimestamp":"2026-01-02T03:04:05Z","labels":{"team":"b"}},"spec":{"memory":"8Gi","mode'
    b'lName":"mistral","backendUrl":"http://m:8000"},"status":{},"lastError":{"reason":"SyncError","mes'
    b'sage":"apply refused: 422","since":"2026-01-02T03:04:05Z"},"sync":{"state":"Conflict","lastError"'
    b':"apply refused: 422","updatedAt":"2026-01-02T03:04:05.678901Z","resourceVersion":"","conflict":{'
    b'"spec":{"memory":"4Gi"},"fields":[{"base":"2Gi","path":"spec.memory","portal":"8Gi","cluster":"4G'
    b'i"}],"resourceVersion":"9"}},"summary":{"model_name":"mistral","engine":"","node_pool":"default",'
    b'"memory_bytes":8589934592,"replicas":1,"gpu_count":0,"ready":false,"accelerator":"","phase":"","r'
    b'unning_replicas":null,"pods":[{"gpus":0,"role":"server","count":1,"running":1,"cpu_millis":0,"acc'
    b'elerator":"","gpu_product":"","memory_bytes":8589934592,"gpu_memory_bytes":0}],"last_active_at":n'
    b'ull,"cooldown_seconds":600,"observed_peak_bytes":null,"utilization_percent":null}}]}'
)
HEADERS = {
    "Content-Type": "application/json",
    "Vary": "Accept",
    "Allow": "GET, POST, HEAD, OPTIONS",
    "X-Frame-Options": "DENY",
    "Content-Length": "2774",
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
