"""The cluster decides too: with ``impersonate_users`` on, a person's writes are tried on the real
API server as that person (Impersonate-User / Impersonate-Group), and the cluster's RBAC 403 is
the answer in the API and on the page. RBAC here: alice, and team gpu's group, may edit in the
test's namespace; bob may not."""

from __future__ import annotations

from collections.abc import Iterator

import kubernetes
import pytest
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import NamespaceGrant, Team
from clusters.models import AuditEntry, Cluster, SyncState
from clusters.sync.audit import Actor, record
from clusters.sync.outbound import Outcome, apply_object
from models_app.models import InferenceModel
from tests.accounts.conftest import sample_in, store
from tests.clusters.conftest import sample_manifest
from tests.conftest import ALL_KIND_PERMS
from tests.kube_rbac import wait_until_rbac_applies

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/api/inferencemodels/"
RBAC_V1 = "rbac.authorization.k8s.io/v1"


@pytest.fixture
def rbac(kube) -> None:
    """A Role for the CRDs' groups in the namespace, bound to the user alice and to the group of
    team gpu (as the portal names it); nobody else."""
    rbac_api = kubernetes.client.RbacAuthorizationV1Api(kube.api_client)
    verbs = ["get", "list", "watch", "create", "patch", "update", "delete"]
    role = {"apiVersion": RBAC_V1, "kind": "Role", "metadata": {"name": "editor", "namespace": kube.namespace},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": verbs}]}  # fmt: skip
    rbac_api.create_namespaced_role(kube.namespace, role)
    bindings = []
    for name, kind, subject in (("alice-edits", "User", "alice"), ("gpu-edits", "Group", "portal:team:gpu")):
        bindings.append({
            "apiVersion": RBAC_V1, "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": kube.namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "editor"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": subject}],
        })  # fmt: skip
        rbac_api.create_namespaced_role_binding(kube.namespace, bindings[-1])
    wait_until_rbac_applies(kube.api_client, [role, *bindings])


@pytest.fixture
def impersonator_token(kube) -> Iterator[str]:
    """A ServiceAccount token that may do nothing but impersonate: the portal's credential, as the
    issue asks for clusters that impersonate (every write it makes must go as a person)."""
    core, rbac_api = (
        kubernetes.client.CoreV1Api(kube.api_client),
        kubernetes.client.RbacAuthorizationV1Api(kube.api_client),
    )
    name = f"impersonator-{kube.namespace}"
    core.create_namespaced_service_account(kube.namespace, {"metadata": {"name": "portal"}})
    role = {"apiVersion": RBAC_V1, "kind": "ClusterRole", "metadata": {"name": name},
            "rules": [{"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}]}  # fmt: skip
    binding = {
        "apiVersion": RBAC_V1, "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "portal", "namespace": kube.namespace}],
    }
    rbac_api.create_cluster_role(role)
    rbac_api.create_cluster_role_binding(binding)
    wait_until_rbac_applies(kube.api_client, [role, binding])
    token = core.create_namespaced_service_account_token(
        "portal", kube.namespace, {"spec": {"expirationSeconds": 3600}}
    )
    yield token.status.token
    rbac_api.delete_cluster_role_binding(name)
    rbac_api.delete_cluster_role(name)


@pytest.fixture
def people(kube, make_user):
    """alice (team ml), bob (team ml), carol (teams ml and gpu), all with the portal's grant of the namespace."""
    cluster = kube.register(impersonate_users=True)
    if kube.plane is not None:  # straight to kube-apiserver: the fault proxy folds repeated headers into one
        cluster.server_url = kube.plane.url
        cluster.save()
    ml, gpu = Team.objects.create(name="ml"), Team.objects.create(name="gpu")
    for team in (ml, gpu):
        NamespaceGrant.objects.create(team=team, cluster=cluster, namespace=kube.namespace)
    return (
        cluster,
        make_user("alice", perms=ALL_KIND_PERMS, teams=[ml]),
        make_user("bob", perms=ALL_KIND_PERMS, teams=[ml]),
        make_user("carol", perms=ALL_KIND_PERMS, teams=[gpu, ml]),
    )


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_clusters_rbac_decides_writes_made_through_the_api_and_pages(kube, rbac, people, impersonator_token):
    cluster, alice, bob, carol = people
    cluster.bearer_token = impersonator_token  # instead of the admin's token
    cluster.save()
    manifest = sample_manifest("inferencemodel-llama-2-70b.yaml", kube.namespace)

    refused = api(bob).post(f"{URL}?cluster={cluster.name}", manifest, format="json")
    assert refused.status_code == 403, refused.content
    assert "refused this for you" in refused.json()["detail"] and "bob" in refused.json()["detail"]
    assert not InferenceModel.objects.exists()  # nothing saved, nothing queued

    created = api(alice).post(f"{URL}?cluster={cluster.name}", manifest, format="json")
    assert created.status_code == 201, created.content
    row = InferenceModel.objects.get()
    assert row.uid, row.last_error  # applied (eager Celery) as alice: the portal itself may only impersonate
    assert kube.read(row.kube, row.name) is not None

    page = Client()
    page.force_login(bob)
    forbidden = page.post(f"/models/inferencemodels/{row.pk}/delete/")
    assert forbidden.status_code == 403 and "refused this for you" in forbidden.content.decode()
    assert api(bob).delete(f"{URL}{row.pk}/").status_code == 403
    assert kube.read(row.kube, row.name) is not None

    other = {
        **manifest,
        "metadata": {**manifest["metadata"], "name": "by-a-group"},
        "spec": {**manifest["spec"], "modelName": "by-a-group"},  # a gateway id of its own
    }
    by_group = api(carol).post(f"{URL}?cluster={cluster.name}", other, format="json")
    assert by_group.status_code == 201, by_group.content  # one of her groups (teams) is bound
    assert InferenceModel.objects.get(name="by-a-group").uid

    patched = api(alice).patch(f"{URL}{row.pk}/", {"metadata": {"labels": {"tier": "gold"}}}, format="json")
    assert patched.status_code == 200, patched.content


def test_without_the_switch_the_portals_grants_alone_decide(kube, rbac, people):
    cluster, _, bob, _ = people
    cluster.impersonate_users = False
    cluster.save()
    manifest = sample_manifest("inferencemodel-llama-2-70b.yaml", kube.namespace)
    assert api(bob).post(f"{URL}?cluster={cluster.name}", manifest, format="json").status_code == 201


@pytest.mark.django_db
def test_a_reserved_persons_change_is_never_sent_as_them(make_user):
    """A user named system:... (code can make one; the forms and single sign-on cannot) is never
    impersonated: the apply fails on the row, saying why, instead of reaching the cluster."""
    cluster = Cluster.objects.create(name="east", server_url="https://127.0.0.1:9", impersonate_users=True,
                                     auth_method=Cluster.AuthMethod.TOKEN)  # fmt: skip
    row = store(cluster, sample_in("InferenceModel", "ml"))
    InferenceModel.objects.filter(pk=row.pk).update(sync_state=SyncState.PENDING_APPLY)
    record(row, AuditEntry.Action.UPDATED, Actor("system:masters", AuditEntry.Source.API, make_user("system:masters")))
    assert apply_object(InferenceModel, row.pk) == Outcome.ERROR
    assert "reserved" in InferenceModel.objects.get(pk=row.pk).last_error
