"""Where a model may answer and under which id, refused at validation: the API, ``/api/apply/``,
the model's ``clean()`` (admin and forms), and staff's decisions over the API (audited)."""

from __future__ import annotations

import copy

import pytest
from django.core.exceptions import ValidationError

from accounts.models import NamespaceGrant, Team
from clusters.models import AuditEntry, Cluster
from inference_gateway.models import BackendHost, SharedGatewayId, SharedNamespace
from models_app.models import InferenceModel

MANIFEST = {
    "apiVersion": "inference.eh-ops.io/v1alpha1",
    "kind": "InferenceModel",
    "metadata": {"name": "llama", "namespace": "team-a"},
    "spec": {"modelName": "llama", "memory": "1Gi", "backendUrl": "http://vllm:8000"},
}


def manifest(backend_url: str = "http://vllm:8000", name: str = "llama", model_name: str = "llama",
             namespace: str = "team-a") -> dict:
    body = copy.deepcopy(MANIFEST)
    body["metadata"].update(name=name, namespace=namespace)
    body["spec"].update(backendUrl=backend_url, modelName=model_name)
    return body


@pytest.fixture
def team_a_editor(api_as, make_user):
    """An APIClient of a member of team-a, which owns namespace team-a only."""
    from rest_framework.test import APIClient

    from tests.conftest import ALL_KIND_PERMS

    team = Team.objects.create(name="team-a")
    NamespaceGrant.objects.create(team=team, cluster=None, namespace="team-a")
    client = APIClient()
    client.force_authenticate(make_user("alice", perms=ALL_KIND_PERMS, teams=[team]))
    return client


@pytest.fixture
def target(db) -> Cluster:
    """The cluster models are created in (the gateway tests' ``cluster`` fixture needs a transactional database)."""
    return Cluster.objects.create(name="prod", auth_method=Cluster.AuthMethod.SNAPSHOT)


@pytest.fixture
def no_loopback(settings):
    settings.GATEWAY_ALLOW_LOOPBACK = False
    return settings


REFUSED = {
    "file:///etc/passwd": "must use http or https, not 'file'",
    "gopher://127.0.0.1:6379/_INFO": "must use http or https, not 'gopher'",
    "http://127.0.0.1:5432": "is loopback",
    "http://localhost:6379": "is loopback",
    "http://[::1]:8000": "is loopback",
    "http://[::ffff:127.0.0.1]:8000": "is loopback",
    "http://2130706433:8000": "is loopback",
    "http://127.1:8000": "is loopback",
    "http://0.0.0.0:8000": "is not a unicast address",
    "http://169.254.169.254/latest/meta-data": "is a cloud metadata address",
    "http://169.254.10.10:8000": "is link-local",
    "http://[fe80::1]:8000": "is link-local",
    "http://100.100.100.200/latest": "is a cloud metadata address",
    "http://[fd00:ec2::254]/latest": "is a cloud metadata address",
    "http://metadata.google.internal/computeMetadata/v1": "is a cloud metadata address",
    "http://api.example.com/v1": "outside the cluster and not on cluster prod's backend allow-list",
    "http://10.20.30.40:8000": "outside the cluster and not on cluster prod's backend allow-list",
    "http://vllm.team-b:8000": "names Service vllm in namespace team-b, which the team of namespace team-a may not use",
    "http://vllm.team-b.svc.cluster.local:8000": "names Service vllm in namespace team-b",
    "http://kubernetes.default.svc:443": "which is the cluster's API server",
    "http://portal.example.org:8000": "is the portal's own address",
    # odd spellings, read as the gateway's client connects (inference_gateway/addresses.py)
    "http://[::127.0.0.1]:8000": "names 127.0.0.1, which is loopback",
    "http://0x7f.1:8000": "names 127.0.0.1, which is loopback",
    "http://0177.0.0.1:8000": "names 127.0.0.1, which is loopback",
    "http://127.0.0.1.:8000": "names 127.0.0.1, which is loopback",
    "http://[64:ff9b::a9fe:a9fe]/": "names 169.254.169.254, which is a cloud metadata address",
    "http://127%2e0.0.1:8000": "which is not a host name",
    "http://PORTAL.example.org.:8000": "names portal.example.org, which is the portal's own address",
    "http://\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff11:8210": "is not a valid uri",  # the CRD schema
}


@pytest.mark.parametrize("backend_url", list(REFUSED))
def test_every_refused_backend_class_is_a_400_naming_the_field_and_rule(
    team_a_editor, target, no_loopback, backend_url: str
) -> None:
    no_loopback.GATEWAY_OWN_HOSTS = ["portal.example.org"]
    answer = team_a_editor.post("/api/inferencemodels/", manifest(backend_url), format="json")
    assert answer.status_code == 400, answer.json()
    (message,) = answer.json()["spec.backendUrl"]
    assert message.startswith("spec.backendUrl: ") and REFUSED[backend_url] in message
    assert not InferenceModel.objects.exists()


def test_apply_and_clean_refuse_the_same_way(team_a_editor, target, no_loopback) -> None:
    applied = team_a_editor.post("/api/apply/", [manifest("http://169.254.169.254/")], format="json")
    assert applied.status_code == 400
    (failure,) = applied.json()["documents"]
    assert "is a cloud metadata address" in failure["errors"]["spec.backendUrl"][0]

    row = InferenceModel(cluster=target, namespace="team-a", name="x",
                         spec={"modelName": "x", "memory": "1Gi", "backendUrl": "gopher://127.0.0.1:6379/"})
    with pytest.raises(ValidationError) as caught:
        row.full_clean()  # the admin's and the portal forms' path
    assert "must use http or https" in str(caught.value)


def test_allowed_backends(team_a_editor, target, no_loopback, settings) -> None:
    def create(url: str, name: str) -> int:
        return team_a_editor.post("/api/inferencemodels/", manifest(url, name, name), format="json").status_code

    assert create("http://vllm:8000/v1", "own-service") == 201
    assert create("http://vllm.team-a.svc.cluster.local:8000", "own-namespace") == 201
    assert create("http://vllm-server.ml-platform:8000", "shared-before") == 400
    SharedNamespace.objects.create(cluster=target, namespace="ml-platform")
    assert create("http://vllm-server.ml-platform:8000", "shared-after") == 201
    BackendHost.objects.create(cluster=target, host="*.example.com")
    BackendHost.objects.create(cluster=target, host="10.20.0.0/16")
    assert create("https://api.example.com/v1", "external-name") == 201
    assert create("http://10.20.30.40:8000", "external-ip") == 201
    # a team holding grants on two namespaces may point one's models at the other's Services
    NamespaceGrant.objects.create(team=Team.objects.get(name="team-a"), cluster=target, namespace="team-a-tools",
                                  access=NamespaceGrant.Access.VIEW)
    assert create("http://embedder.team-a-tools:8000", "sibling-namespace") == 201
    SharedNamespace.objects.create(cluster=target, namespace="default")
    assert create("http://kubernetes.default.svc.cluster.local", "api-server") == 400  # usable namespace or not
    # an allow-list never opens what no backend may be
    BackendHost.objects.create(cluster=target, host="169.254.0.0/16")
    assert create("http://169.254.169.254/", "metadata") == 400
    assert create("http://127.0.0.1:8000", "loopback-off") == 400
    settings.GATEWAY_ALLOW_LOOPBACK = True
    assert create("http://127.0.0.1:8000", "loopback-on") == 201


def test_a_second_object_claiming_a_served_id_is_refused_unless_staff_share_it(team_a_editor, target) -> None:
    assert team_a_editor.post("/api/inferencemodels/", manifest(), format="json").status_code == 201
    copy_of = manifest(name="llama-copy")
    refused = team_a_editor.post("/api/inferencemodels/", copy_of, format="json")
    assert refused.status_code == 400
    (message,) = refused.json()["spec.modelName"]
    assert "would serve gateway id team-a/llama, which InferenceModel prod/team-a/llama already serves" in message
    # another kind claiming the same id is refused too
    other = team_a_editor.post("/api/kubeai-models/", {
        "apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "llama", "namespace": "team-a"},
        "spec": {"url": "ollama://llama", "engine": "OLlama", "features": ["TextGeneration"]}}, format="json")
    assert other.status_code == 400 and "team-a/llama" in other.json()["metadata.name"][0]
    SharedGatewayId.objects.create(cluster=target, gateway_id="team-a/llama")
    assert team_a_editor.post("/api/inferencemodels/", copy_of, format="json").status_code == 201
    # editing the first one is not a second claim
    first = InferenceModel.objects.get(name="llama")
    first.spec = {**first.spec, "memory": "2Gi"}
    first.full_clean()


def test_staff_keep_the_decisions_over_the_api_audited(api_as, target) -> None:
    member = api_as(perms=[])
    assert member.get("/api/gateway/backend-hosts/").status_code == 403
    assert member.post("/api/gateway/backend-hosts/", {"cluster": "prod", "host": "x.example.com"}).status_code == 403
    staff = api_as(staff=True)
    created = staff.post("/api/gateway/backend-hosts/", {"cluster": "prod", "host": "*.example.com", "note": "vendor"},
                         format="json")
    assert created.status_code == 201, created.json()
    bad = staff.post("/api/gateway/backend-hosts/", {"cluster": "prod", "host": "169.254.0.0/16"}, format="json")
    assert bad.status_code == 400 and "link-local" in bad.json()["host"][0]
    pk = created.json()["id"]
    assert staff.patch(f"/api/gateway/backend-hosts/{pk}/", {"note": "vendor X"}, format="json").status_code == 200
    shared = staff.post("/api/gateway/shared-namespaces/", {"cluster": "prod", "namespace": "ml-platform"},
                        format="json")
    assert shared.status_code == 201
    assert staff.delete(f"/api/gateway/backend-hosts/{pk}/").status_code == 204
    entries = list(AuditEntry.objects.filter(kind__in=["BackendHost", "SharedNamespace"]).order_by("id")
                   .values_list("kind", "action", "name", "source"))
    assert entries == [("BackendHost", "created", "*.example.com", "api"),
                       ("BackendHost", "updated", "*.example.com", "api"),
                       ("SharedNamespace", "created", "ml-platform", "api"),
                       ("BackendHost", "deleted", "*.example.com", "api")]


def test_the_model_page_shows_the_id_and_snippets_or_why_it_is_not_routed(client, make_user, target, settings) -> None:
    from django.urls import reverse

    settings.GATEWAY_PUBLIC_URL = "https://gateway.example.org"
    client.force_login(make_user("viewer"))
    routed = InferenceModel.objects.create(cluster=target, namespace="team-a", name="llama", sync_state="Synced",
                                           spec={"modelName": "meta/llama", "memory": "1Gi",
                                                 "backendUrl": "http://vllm:8000"})
    page = client.get(reverse("inferencemodel-detail-page", args=[routed.pk])).content.decode()
    assert '<code id="gateway-id">team-a/meta/llama</code>' in page
    assert "curl https://gateway.example.org/v1/chat/completions" in page
    assert 'base_url=&quot;https://gateway.example.org/v1&quot;' in page
    assert "model=&quot;team-a/meta/llama&quot;" in page

    mirrored = InferenceModel.objects.create(cluster=target, namespace="team-a", name="meta", sync_state="Synced",
                                             spec={"modelName": "meta", "memory": "1Gi",
                                                   "backendUrl": "http://169.254.169.254/"})
    page = client.get(reverse("inferencemodel-detail-page", args=[mirrored.pk])).content.decode()
    assert "The gateway does not route this model: spec.backendUrl names 169.254.169.254, which is a cloud" in page
    assert 'id="gateway-curl"' not in page


def test_staff_keep_the_decisions_in_the_admin_audited(client, make_user, target) -> None:
    root = make_user("root", staff=True)
    root.is_superuser = True
    root.save()
    client.force_login(root)
    added = client.post("/admin/inference_gateway/sharednamespace/add/",
                        {"cluster": target.pk, "namespace": "ml-platform", "note": "model servers"})
    assert added.status_code == 302, added.content.decode()[:2000]
    bad = client.post("/admin/inference_gateway/backendhost/add/", {"cluster": target.pk, "host": "not a host"})
    assert bad.status_code == 200 and "is not a host name with a domain" in bad.content.decode()
    shared = SharedNamespace.objects.get()
    deleted = client.post(f"/admin/inference_gateway/sharednamespace/{shared.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302
    assert list(AuditEntry.objects.filter(kind="SharedNamespace").order_by("id").values_list("action", "source")) == [
        ("created", "admin"), ("deleted", "admin")]


@pytest.mark.parametrize("model_name", ["my model", "llama\u200b", "ll\u0430ma", "../etc", "x" * 300, "org/a/b",
                                        "a..b", "-x", "team\uff0fidx", "o" * 97 + "/m"])
def test_model_names_are_what_kubernetes_and_openai_clients_expect(team_a_editor, target, model_name: str) -> None:
    answer = team_a_editor.post("/api/inferencemodels/", manifest(model_name=model_name), format="json")
    assert answer.status_code == 400, answer.json()
    (message,) = answer.json()["spec.modelName"]
    assert "must be a model name of ASCII letters, digits" in message


def test_a_model_name_spelled_as_another_objects_id_is_refused(team_a_editor, target) -> None:
    InferenceModel.objects.create(cluster=target, namespace="team-b", name="idx", sync_state="Synced",
                                  spec={"modelName": "idx", "memory": "1Gi", "backendUrl": "http://vllm:8000"})
    answer = team_a_editor.post("/api/inferencemodels/", manifest(model_name="team-b/idx"), format="json")
    assert answer.status_code == 400
    assert "is spelled as gateway id team-b/idx, which InferenceModel prod/team-b/idx serves" in (
        answer.json()["spec.modelName"][0])
    hf = team_a_editor.post("/api/inferencemodels/", manifest(model_name="meta-llama/Llama-3-8B"), format="json")
    assert hf.status_code == 201, hf.json()  # a Hugging Face id naming no served id is fine


def test_shared_gateway_ids_are_ids(api_as, target) -> None:
    staff = api_as(staff=True)
    for bad in ("team-a", "Team-A/x", "team-a/my model", "team-a/../x", "/x"):
        answer = staff.post("/api/gateway/shared-gateway-ids/", {"cluster": "prod", "gateway_id": bad}, format="json")
        assert answer.status_code == 400 and "gateway_id" in answer.json(), (bad, answer.json())
    good = staff.post("/api/gateway/shared-gateway-ids/", {"cluster": "prod", "gateway_id": "team-a/meta-llama/L-3"},
                      format="json")
    assert good.status_code == 201, good.json()
