"""Fixtures shared by the whole suite: clusters, users with given permissions, API clients, samples."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import kubernetes
import pytest
import yaml
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import ALL_NAMESPACES, NamespaceGrant, Team
from clusters.kube import informers
from clusters.models import Cluster
from devstack.control_plane import ControlPlane, ControlPlaneUnavailable, running_control_plane
from tests.support.clusters import KubeCluster, external_kubeconfig
from tests.support.database import migrated_template
from tests.support.fault_proxy import FaultProxy
from tests.support.gitops import flux, gitea, gitops_repo  # noqa: F401 - the GitOps stack's fixtures, suite-wide
from tests.support.keda import apply_test_crds, apply_test_crds_to

# Hypothesis's per-example deadline (200 ms) is a wall-clock tolerance: on a busy 2-core machine a
# correct example overruns it (a merge example took 255 ms beside other work). Examples are bounded
# by count instead, and a slow one shows in --durations, never as a failure.
hypothesis.settings.register_profile("suite", deadline=None)
hypothesis.settings.load_profile("suite")


def load_samples() -> list[tuple[str, dict[str, Any]]]:
    """Every reference sample as (file name, manifest)."""
    return [(path.name, yaml.safe_load(path.read_text())) for path in sorted(Path(settings.SAMPLES_DIR).glob("*.yaml"))]


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """pytest-django's hook before the test database is made: on PostgreSQL it is copied from the
    migrated template (tests/support/database.py) instead of running every migration again."""
    template = migrated_template()
    if template is not None:
        settings.DATABASES["default"].setdefault("TEST", {})["TEMPLATE"] = template


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    """Throttling counts requests in the cache: each test starts with none counted."""
    cache.clear()


@pytest.fixture(autouse=True)
def _no_informers_left() -> Iterator[None]:
    """Each test's informer caches stop with it: a watch of a namespace gone (its test ended) would
    keep reconnecting through the fault proxy, among the next tests' watches."""
    yield
    informers.stop_all()


@pytest.fixture
def metrics_client(settings) -> Client:
    """A client Prometheus would be: it sends the bearer token /metrics requires."""
    settings.METRICS_TOKEN = "metrics-token-for-tests"
    return Client(HTTP_AUTHORIZATION="Bearer metrics-token-for-tests")


@pytest.fixture
def cluster(db) -> Cluster:
    return Cluster.objects.create(
        name="prod",
        auth_method=Cluster.AuthMethod.TOKEN,
        server_url="https://10.0.0.1:6443",
        bearer_token="s3cr3t-token",
    )


@pytest.fixture
def make_user(db):
    """``make_user("alice", perms=["models_app.add_inferencemodel"], staff=False, teams=None)``.

    ``teams=None`` makes the user a member of a team owning every namespace of every cluster, so
    tests about something other than access see what they create; pass ``teams=[...]`` (or ``[]``)
    to test team scoping.
    """

    def make(username: str, perms: list[str] = (), staff: bool = False, teams: list[Team] | None = None) -> User:
        user = User.objects.create_user(username, password="pw-for-tests", is_staff=staff)
        if teams is None:
            everywhere, created = Team.objects.get_or_create(name="everywhere")
            if created:
                NamespaceGrant.objects.create(team=everywhere, cluster=None, namespace=ALL_NAMESPACES)
            teams = [everywhere]
        for team in teams:
            team.members.add(user)
        for perm in perms:
            app_label, codename = perm.split(".")
            user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
        return User.objects.get(pk=user.pk)  # fresh instance: permission cache empty

    return make


@pytest.fixture
def api_as(make_user):
    """``api_as(perms=[...], staff=False)`` -> an APIClient logged in as a new user with those rights."""
    counter = iter(range(1000))

    def make(perms: list[str] = (), staff: bool = False) -> APIClient:
        client = APIClient()
        client.force_authenticate(make_user(f"user{next(counter)}", perms=perms, staff=staff))
        return client

    return make


# The API endpoint of each mirrored kind, by kind.
ENDPOINTS = {
    "InferenceModel": "/api/inferencemodels/",
    "Model": "/api/kubeai-models/",
    "ModelService": "/api/modelservices/",
    "InferenceConfig": "/api/inferenceconfigs/",
    "InferenceRun": "/api/inferenceruns/",
}


ALL_KIND_PERMS = [
    f"{app}.{action}_{model}"
    for app, model in [
        ("models_app", "inferencemodel"),
        ("models_app", "kubeaimodel"),
        ("models_app", "modelservice"),
        ("runs_app", "inferenceconfig"),
        ("runs_app", "inferencerun"),
    ]
    for action in ("add", "change", "delete", "view")
]


@pytest.fixture
def editor(api_as) -> APIClient:
    """A user allowed to add, change and delete every mirrored kind (not staff)."""
    return api_as(perms=ALL_KIND_PERMS)




# -- the real control plane ---------------------------------------------------------------------------

REAL_CLUSTER_FIXTURES = {"control_plane", "kube", "managed", "live_cluster"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that talks to a Kubernetes API server carries the ``realcluster`` marker; the
    ``long`` ones (minutes each) run first, so that parallel workers (``--dist worksteal``) end
    together: the journey, collected half-way, once started 12 minutes in and ran 3 minutes past
    the others."""
    for item in items:
        if REAL_CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.realcluster)
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # stable: otherwise as collected


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane | None]:
    """etcd, kube-apiserver, controller manager, scheduler and kwok for the whole session, with the
    CRDs of platform/crds and KEDA's (tests.support.keda) applied; None when ``KUBECONFIG`` names a
    cluster to use instead."""
    if external_kubeconfig():
        yield None
        return
    try:
        with running_control_plane(prepare=apply_test_crds_to) as plane:
            yield plane
    except ControlPlaneUnavailable as reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the real control plane: {reason}")
        pytest.skip(str(reason))


@pytest.fixture(scope="session")
def fault_proxy(control_plane: ControlPlane | None) -> Iterator[FaultProxy | None]:
    """The fault-injecting proxy in front of the session's kube-apiserver (none for KUBECONFIG)."""
    if control_plane is None:
        yield None
        return
    workdir = control_plane.workdir
    proxy = FaultProxy(control_plane.url, str(workdir / "ca.crt"), str(workdir / "apiserver.crt"),
                       str(workdir / "apiserver.key")).start()
    yield proxy
    proxy.stop()


@pytest.fixture
def kube(control_plane: ControlPlane | None, fault_proxy: FaultProxy | None) -> Iterator[KubeCluster]:
    """This test's namespace on the real API server; ``kube.register()`` makes its Cluster row."""
    if control_plane is None:
        config = external_kubeconfig()
        api_client = kubernetes.config.new_client_from_config(config_file=config)
        with api_client:
            apply_test_crds(api_client)
            cluster = KubeCluster(api_client, kubeconfig=config)
            yield cluster
            cluster.close()
        return
    control_plane.check_alive()
    with control_plane.api_client() as api_client:
        cluster = KubeCluster(api_client, plane=control_plane, proxy=fault_proxy)
        yield cluster
        cluster.close()
