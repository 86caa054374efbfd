"""Two teams in one cluster, one object of every kind in each team's namespace, four kinds of visitor."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import NamespaceGrant, Team
from clusters.kinds import model_for
from clusters.models import Cluster, KubeObject, SyncState
from clusters.validation.manifests import validate_manifest
from clusters.web.services import assign_manifest
from devstack.oidc_provider import OidcProvider
from tests.conftest import ALL_KIND_PERMS, ENDPOINTS, load_samples

SAMPLE_FILES = {
    "InferenceModel": "inferencemodel-llama-2-70b.yaml",
    "Model": "model-gemma2-2b-cpu.yaml",
    "ModelService": "modelservice-qwen3-8b.yaml",
    "InferenceConfig": "inferenceconfig-example-inference-config.yaml",
    "InferenceRun": "inferencerun-iris-run-january.yaml",
}
SAMPLES = dict(load_samples())


def sample_in(kind: str, namespace: str, name: str | None = None) -> dict[str, Any]:
    """The kind's reference sample moved into ``namespace`` (a run's configRef follows it)."""
    manifest = copy.deepcopy(SAMPLES[SAMPLE_FILES[kind]])
    manifest["metadata"]["namespace"] = namespace
    if name:
        manifest["metadata"]["name"] = name
        model = model_for(manifest["apiVersion"], manifest["kind"])
        path = getattr(model, "model_name_path", "")
        if path and path != "metadata.name":  # a new object serves a name of its own (one owner per gateway id)
            *parents, last = path.split(".")
            holder = manifest
            for key in parents:
                holder = holder[key]
            holder[last] = name
    if kind == "InferenceRun":
        manifest["spec"]["configRef"]["namespace"] = namespace
    return manifest


def store(cluster: Cluster, manifest: dict[str, Any], status: dict[str, Any] | None = None) -> KubeObject:
    """A row as the sync stores it: validated, defaulted, Synced."""
    model = model_for(manifest["apiVersion"], manifest["kind"])
    obj = model(cluster=cluster, sync_state=SyncState.SYNCED, status=status or {})
    assign_manifest(obj, validate_manifest(model, manifest))
    obj.save()
    return obj


@dataclass
class World:
    cluster: Cluster
    vision: Team
    nlp: Team
    objects: dict[tuple[str, str], KubeObject]  # (kind, namespace) -> row
    member: User  # of vision
    other: User  # of nlp
    viewer: User  # vision with view-only access
    staff: User

    def api(self, who: str | None) -> APIClient:
        client = APIClient()
        if who:
            client.force_authenticate(getattr(self, who))
        return client

    def browser(self, who: str | None) -> Client:
        client = Client()
        if who:
            client.force_login(getattr(self, who))
        return client


@pytest.fixture
def world(make_user) -> World:
    cluster = Cluster.objects.create(name="east", auth_method=Cluster.AuthMethod.SNAPSHOT)
    vision, nlp, watchers = (Team.objects.create(name=name) for name in ("vision", "nlp", "watchers"))
    NamespaceGrant.objects.create(team=vision, cluster=cluster, namespace="vision")
    NamespaceGrant.objects.create(team=nlp, cluster=cluster, namespace="nlp")
    NamespaceGrant.objects.create(team=watchers, cluster=cluster, namespace="vision", access=NamespaceGrant.Access.VIEW)
    objects = {
        (kind, namespace): store(cluster, sample_in(kind, namespace))
        for kind in ENDPOINTS
        for namespace in ("vision", "nlp")
    }
    return World(
        cluster=cluster,
        vision=vision,
        nlp=nlp,
        objects=objects,
        member=make_user("vera", perms=ALL_KIND_PERMS, teams=[vision]),
        other=make_user("otto", perms=ALL_KIND_PERMS, teams=[nlp]),
        viewer=make_user("wes", perms=ALL_KIND_PERMS, teams=[watchers]),
        staff=make_user("stan", perms=ALL_KIND_PERMS, staff=True, teams=[]),
    )


@pytest.fixture
def sso_provider(live_server, tmp_path, settings) -> Iterator[OidcProvider]:
    """The test identity provider with one user (ada, group ml-vision), the portal configured for it."""
    idp = OidcProvider(workdir=tmp_path, redirect_uris=[f"{live_server.url}/oidc/callback/"])
    idp.add_user("u-ada", "ada", "ada-password", groups=["ml-vision"])
    idp.start()
    for name, value in idp.portal_settings().items():
        setattr(settings, name, value)
    yield idp
    idp.stop()
