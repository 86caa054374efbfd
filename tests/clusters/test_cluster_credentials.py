"""Cluster credentials: model permissions decide who edits a cluster, credentials only travel over
https unless staff allow plain http, URLs carry no credentials, and no URL shown or logged does."""

from __future__ import annotations

import io
import logging

import pytest
from django.utils import timezone

from clusters.kube.client import PermanentError, build_api_client
from clusters.models import Cluster
from devstack.ports import free_port
from scheduler.rightsizing.prometheus import PrometheusClient, PrometheusError
from scheduler.rightsizing.refresh import refresh_cluster

pytestmark = pytest.mark.django_db

URL = "/api/clusters/"


def test_clusters_need_model_permissions_not_staff(api_as, cluster) -> None:
    assert api_as(staff=True).get(URL).status_code == 403
    assert api_as(staff=True).patch(f"{URL}{cluster.pk}/", {"description": "x"}, format="json").status_code == 403
    viewer = api_as(perms=["clusters.view_cluster"])
    assert viewer.get(URL).status_code == 200
    assert viewer.patch(f"{URL}{cluster.pk}/", {"description": "x"}, format="json").status_code == 403
    changer = api_as(perms=["clusters.change_cluster"])
    assert changer.patch(f"{URL}{cluster.pk}/", {"description": "x"}, format="json").status_code == 200


def test_plain_http_needs_the_flag_and_only_staff_may_set_it(api_as, cluster) -> None:
    body = {"name": "edge", "server_url": "http://edge:6443", "bearer_token": "t"}
    adder = api_as(perms=["clusters.add_cluster"])
    refused = adder.post(URL, body, format="json")
    assert refused.status_code == 400 and "must be https://" in str(refused.json()["server_url"])
    not_staff = adder.post(URL, {**body, "allow_insecure_http": True}, format="json")
    assert not_staff.status_code == 400 and "only staff" in str(not_staff.json())
    staff = api_as(perms=["clusters.add_cluster"], staff=True)
    assert staff.post(URL, {**body, "allow_insecure_http": True}, format="json").status_code == 201


@pytest.mark.parametrize("url", ["https://user:pw@10.0.0.9:6443", "https://10.0.0.9:6443/?token=pw"])
def test_urls_carrying_credentials_are_refused_without_echoing_them(api_as, cluster, url) -> None:
    changer = api_as(perms=["clusters.change_cluster"])
    for field in ("server_url", "prometheus_url"):
        response = changer.patch(f"{URL}{cluster.pk}/", {field: url, "bearer_token": "t"}, format="json")
        assert response.status_code == 400 and field in response.json()
        assert "pw" not in response.content.decode()


def test_a_moved_url_needs_its_credential_again(api_as, cluster) -> None:
    changer = api_as(perms=["clusters.change_cluster"], staff=True)  # the server is staff's (connection_rules)
    moved = changer.patch(f"{URL}{cluster.pk}/", {"server_url": "https://evil:6443"}, format="json")
    assert moved.status_code == 400 and "bearer_token" in moved.json()
    assert Cluster.objects.get().server_url == "https://10.0.0.1:6443"
    given = changer.patch(f"{URL}{cluster.pk}/", {"server_url": "https://new:6443", "bearer_token": "n"}, format="json")
    assert given.status_code == 200 and Cluster.objects.get().bearer_token == "n"


def test_admin_form_refuses_a_moved_url_without_its_credential(client, cluster, django_user_model) -> None:
    client.force_login(django_user_model.objects.create_superuser("root", "r@example.com", "pw"))
    form = {
        "name": cluster.name, "auth_method": "token", "server_url": "https://evil:6443", "namespaces": "",
        "request_timeout_seconds": 10,
    }  # fmt: skip
    response = client.post(f"/admin/clusters/cluster/{cluster.pk}/change/", form)
    assert response.status_code == 200 and "must be given again when server_url changes" in response.content.decode()
    assert Cluster.objects.get().server_url == "https://10.0.0.1:6443"


def test_gateway_never_sends_a_token_over_plain_http_without_the_flag(cluster) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(server_url="http://10.0.0.1:6443")  # a row from before the rule
    with pytest.raises(PermanentError, match="must be https://"):
        build_api_client(Cluster.objects.get())


def test_prometheus_errors_and_logs_never_show_credentials_in_its_url(cluster) -> None:
    url = f"http://scott:tiger@127.0.0.1:{free_port()}/prom?token=tiger2"
    with PrometheusClient(url) as prometheus, pytest.raises(PrometheusError) as error:
        prometheus.query("up", timezone.now())
    assert "tiger" not in str(error.value) and "127.0.0.1" in str(error.value)
    Cluster.objects.filter(pk=cluster.pk).update(prometheus_url=url, allow_insecure_http=True)
    refresh = refresh_cluster(Cluster.objects.get())
    assert not refresh.ok and "tiger" not in refresh.error and "REDACTED@127.0.0.1" in refresh.error
    console = next(handler for handler in logging.getLogger().handlers if handler.get_name() == "console")
    stream = io.StringIO()
    original = console.setStream(stream)
    try:
        logging.getLogger("anything").warning("fetching %s failed", url)
    finally:
        console.setStream(original)
    logged = stream.getvalue()
    assert "fetching http://REDACTED@127.0.0.1" in logged and "tiger" not in logged
