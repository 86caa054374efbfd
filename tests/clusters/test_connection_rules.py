"""A cluster's connection (server, CA, TLS verification, kubeconfig file) is changed only by staff
with ``clusters.change_cluster`` who give the stored credential again, in the API, the admin and its
form alike; kubeconfig files only from CLUSTER_KUBECONFIG_DIR; a CA must be certificates."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from clusters.models import Cluster

pytestmark = pytest.mark.django_db

URL = "/api/clusters/"
CHANGE = ["clusters.change_cluster", "clusters.view_cluster"]


def ca_pem() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


CHANGES = {
    "insecure_skip_tls_verify": True,
    "ca_cert": ca_pem().strip(),  # DRF trims text
    "server_url": "https://10.0.0.2:6443",
    "kubeconfig_context": "other",
}


@pytest.mark.parametrize("field", sorted(CHANGES))
def test_connection_changes_need_staff_the_permission_and_the_credential(api_as, cluster, field) -> None:
    value = CHANGES[field]
    for refused_by in (api_as(perms=CHANGE), api_as(perms=["clusters.view_cluster"], staff=True)):
        response = refused_by.patch(
            f"{URL}{cluster.pk}/", {field: value, "bearer_token": "s3cr3t-token"}, format="json"
        )
        assert response.status_code in (400, 403), response.content
    staff = api_as(perms=CHANGE, staff=True)
    without_credential = staff.patch(f"{URL}{cluster.pk}/", {field: value}, format="json")
    assert without_credential.status_code == 400 and "must be given again" in str(
        without_credential.json()["bearer_token"]
    )
    assert getattr(Cluster.objects.get(), field) != value
    given = staff.patch(f"{URL}{cluster.pk}/", {field: value, "bearer_token": "s3cr3t-token"}, format="json")
    assert given.status_code == 200, given.content
    assert getattr(Cluster.objects.get(), field) == value


def test_a_platform_staff_member_without_staff_status_is_told_why(api_as, cluster) -> None:
    response = api_as(perms=CHANGE).patch(
        f"{URL}{cluster.pk}/", {"insecure_skip_tls_verify": True, "bearer_token": "s3cr3t-token"}, format="json"
    )
    assert response.status_code == 400
    assert "only staff with the clusters.change_cluster permission" in str(response.json()["insecure_skip_tls_verify"])
    assert Cluster.objects.get().insecure_skip_tls_verify is False


def test_other_fields_stay_editable_without_staff(api_as, cluster) -> None:
    response = api_as(perms=CHANGE).patch(f"{URL}{cluster.pk}/", {"description": "gpu cluster"}, format="json")
    assert response.status_code == 200


def test_a_new_cluster_skipping_tls_verification_needs_staff(api_as) -> None:
    body = {"name": "edge", "server_url": "https://edge:6443", "bearer_token": "t", "insecure_skip_tls_verify": True}
    refused = api_as(perms=["clusters.add_cluster", "clusters.change_cluster"]).post(URL, body, format="json")
    assert refused.status_code == 400 and "insecure_skip_tls_verify" in refused.json()
    staff = api_as(perms=["clusters.add_cluster", "clusters.change_cluster"], staff=True)
    assert staff.post(URL, body, format="json").status_code == 201


def test_a_garbage_ca_is_refused(api_as, cluster) -> None:
    staff = api_as(perms=CHANGE, staff=True)
    response = staff.patch(f"{URL}{cluster.pk}/", {"ca_cert": "garbage", "bearer_token": "s3cr3t-token"}, format="json")
    assert response.status_code == 400 and "PEM-encoded certificates" in str(response.json()["ca_cert"])


def test_kubeconfig_files_only_from_the_configured_directory(api_as, cluster, settings, tmp_path) -> None:
    staff = api_as(perms=CHANGE, staff=True)
    allowed = tmp_path / "kubeconfigs"
    allowed.mkdir()
    (allowed / "east.yaml").write_text("apiVersion: v1\nkind: Config\n")
    (tmp_path / "secret.txt").write_text("not yours")

    def point_at(path: str):
        body = {"auth_method": "kubeconfig", "kubeconfig_path": path, "bearer_token": "s3cr3t-token"}
        return staff.patch(f"{URL}{cluster.pk}/", body, format="json")

    settings.CLUSTER_KUBECONFIG_DIR = ""
    assert "CLUSTER_KUBECONFIG_DIR" in str(point_at(str(allowed / "east.yaml")).json()["kubeconfig_path"])
    settings.CLUSTER_KUBECONFIG_DIR = str(allowed)
    for outside in ("/etc/passwd", str(tmp_path / "secret.txt"), str(allowed / ".." / "secret.txt"), "../secret.txt"):
        response = point_at(outside)
        assert response.status_code == 400 and "outside" in str(response.json()["kubeconfig_path"]), outside
    assert point_at(str(allowed / "east.yaml")).status_code == 200
    assert point_at("east.yaml").status_code == 200  # relative to the directory


def admin_form(cluster: Cluster, **changes) -> dict:
    return {
        "name": cluster.name, "auth_method": "token", "server_url": cluster.server_url, "namespaces": "",
        "request_timeout_seconds": 10, **changes,
    }  # fmt: skip


def test_the_admin_applies_the_same_rule(client, cluster, make_user) -> None:
    change_url = f"/admin/clusters/cluster/{cluster.pk}/change/"
    client.force_login(make_user("editor", perms=CHANGE, staff=True))
    refused = client.post(change_url, admin_form(cluster, insecure_skip_tls_verify="on"))
    assert (
        refused.status_code == 200
        and "must be given again to change insecure_skip_tls_verify" in refused.content.decode()
    )
    assert Cluster.objects.get().insecure_skip_tls_verify is False
    saved = client.post(change_url, admin_form(cluster, insecure_skip_tls_verify="on", bearer_token="s3cr3t-token"))
    assert saved.status_code == 302 and Cluster.objects.get().insecure_skip_tls_verify is True
