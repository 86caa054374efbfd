"""The cluster a sync test talks to: the test API server, or a real cluster when KUBECONFIG is set.

Both are driven the same way (``write`` as another cluster writer, ``read``, ``remove``), so the
sync tests run unchanged against kind or k3d. Fault injection exists only on the test server;
tests that need it are skipped on a real cluster.
"""
from __future__ import annotations

import copy
import os
import uuid
from pathlib import Path
from typing import Any

import kubernetes
import yaml
from django.conf import settings

from clusters.kinds import KindInfo
from clusters.models import Cluster
from tests.support.kube_api_server import KubeApiServer


def _kind_of(manifest: dict[str, Any]) -> tuple[str, str]:
    group, version = manifest["apiVersion"].split("/")
    return group, version


class EmulatedCluster:
    """The kmock-based test API server with the CRDs of ``platform/crds`` registered."""

    supports_faults = True

    def __init__(self, name: str = "test") -> None:
        self.name = name
        self.server = KubeApiServer(bookmark_interval=0.2).start()
        self.server.load_crds(settings.CRD_DIR)
        self.namespace = "default"

    def register(self, **extra: Any) -> Cluster:
        """The test server listens on plain http on loopback: allowed explicitly, as staff would."""
        return Cluster.objects.create(name=self.name, auth_method=Cluster.AuthMethod.TOKEN,
                                      server_url=self.server.url, bearer_token="test-token",
                                      allow_insecure_http=True, **extra)

    def write(self, manifest: dict[str, Any], field_manager: str = "kubectl-edit") -> dict[str, Any]:
        """Create or replace as another writer (kubectl, a controller) would; status included."""
        return self.server.put_object(copy.deepcopy(manifest), field_manager=field_manager)

    def read(self, kind: KindInfo, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return self.server.get_object(kind.group, kind.version, kind.plural, namespace or self.namespace, name)

    def remove(self, kind: KindInfo, name: str, namespace: str | None = None) -> None:
        self.server.delete_object(kind.group, kind.version, kind.plural, namespace or self.namespace, name)

    def close(self) -> None:
        self.server.stop()


class RealCluster:
    """A real cluster from ``KUBECONFIG`` (kind, k3d...): CRDs applied, one fresh namespace per test."""

    supports_faults = False

    def __init__(self, name: str = "test") -> None:
        self.name = name
        self.kubeconfig = os.environ["KUBECONFIG"]
        self.api_client = kubernetes.config.new_client_from_config(config_file=self.kubeconfig)
        self.custom = kubernetes.client.CustomObjectsApi(self.api_client)
        extensions = kubernetes.client.ApiextensionsV1Api(self.api_client)
        for path in sorted(Path(settings.CRD_DIR).glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            try:
                extensions.create_custom_resource_definition(crd)
            except kubernetes.client.ApiException as error:
                if error.status != 409:
                    raise
        self.namespace = f"portal-test-{uuid.uuid4().hex[:8]}"
        kubernetes.client.CoreV1Api(self.api_client).create_namespace({"metadata": {"name": self.namespace}})

    def register(self, **extra: Any) -> Cluster:
        return Cluster.objects.create(name=self.name, auth_method=Cluster.AuthMethod.KUBECONFIG,
                                      kubeconfig_path=self.kubeconfig, namespaces=[self.namespace], **extra)

    def write(self, manifest: dict[str, Any], field_manager: str = "kubectl-edit") -> dict[str, Any]:
        group, version = _kind_of(manifest)
        plural = manifest["kind"].lower() + "s"
        body = copy.deepcopy(manifest)
        body["metadata"]["namespace"] = self.namespace
        status = body.pop("status", None)
        current = self.read(KindInfo(group, version, manifest["kind"], plural), body["metadata"]["name"])
        if current is None:
            result = self.custom.create_namespaced_custom_object(group, version, self.namespace, plural, body,
                                                                 field_manager=field_manager)
        else:
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            result = self.custom.replace_namespaced_custom_object(group, version, self.namespace, plural,
                                                                  body["metadata"]["name"], body,
                                                                  field_manager=field_manager)
        if status is not None:
            result = self.custom.patch_namespaced_custom_object_status(
                group, version, self.namespace, plural, body["metadata"]["name"], {"status": status})
        return result

    def read(self, kind: KindInfo, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return self.custom.get_namespaced_custom_object(kind.group, kind.version, namespace or self.namespace,
                                                            kind.plural, name)
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def remove(self, kind: KindInfo, name: str, namespace: str | None = None) -> None:
        self.custom.delete_namespaced_custom_object(kind.group, kind.version, namespace or self.namespace,
                                                    kind.plural, name)

    def close(self) -> None:
        kubernetes.client.CoreV1Api(self.api_client).delete_namespace(self.namespace)
        self.api_client.close()


def open_cluster(name: str = "test") -> EmulatedCluster | RealCluster:
    return RealCluster(name) if os.environ.get("KUBECONFIG") else EmulatedCluster(name)
