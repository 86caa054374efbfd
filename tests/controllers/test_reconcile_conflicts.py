"""A reconcile whose write the API server refuses as stale (409: another writer changed the object after the
reconcile read it) reads it again and redoes, as client-go's RetryOnConflict does (issue 43: in the live
demo, whose processes share no lease, a guided-deploy model's wake raced the watcher's reconcile and the
gateway answered 503 naming the conflict). The conflict is the real API server's: another writer annotates
the model between the reconcile's read and its write."""

from __future__ import annotations

import kubernetes
import pytest

from clusters.kube.client import ClusterGateway
from models_app.controller import FINALIZER
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest
from tests.support.clusters import reconcile_row

pytestmark = pytest.mark.realcluster
MODEL = "llama-2-7b"


def test_a_write_refused_as_stale_is_redone_on_a_fresh_read(managed) -> None:
    kube, cluster = managed
    kube.write(sample_manifest("inferencemodel-llama-2-7b.yaml"))
    kube.sync()
    kind = InferenceModel.kube
    custom = kubernetes.client.CustomObjectsApi(kube.api_client)
    custom.patch_namespaced_custom_object(kind.group, kind.version, kube.namespace, kind.plural, MODEL,
                                          {"metadata": {"finalizers": []}})  # the reconcile adds it back, by rv
    gateway, reads = ClusterGateway(cluster), []
    read = gateway.get

    def read_then_another_writer(*arguments):
        """The object as read, then changed by another writer (once): the read's resourceVersion goes stale."""
        found = read(*arguments)
        if arguments[0] == kind and not reads:
            custom.patch_namespaced_custom_object(kind.group, kind.version, kube.namespace, kind.plural, MODEL,
                                                  {"metadata": {"annotations": {"example.com/other": "writer"}}})
        reads.append(arguments)
        return found

    gateway.get = read_then_another_writer
    try:
        reconcile_row(InferenceModel.objects.get(name=MODEL), gateway=gateway)
    finally:
        gateway.close()
    assert len([each for each in reads if each[0] == kind]) == 2  # refused once as stale, read again
    model = kube.read(kind, MODEL)
    assert FINALIZER in model["metadata"]["finalizers"]
    assert model["metadata"]["annotations"]["example.com/other"] == "writer"  # the other writer's change kept
