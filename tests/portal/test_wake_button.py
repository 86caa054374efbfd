"""The model page offers Wake only where the portal is the InferenceModel controller."""
from __future__ import annotations

from django.contrib.auth.models import User

from clusters.models import Cluster, SyncState
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest


def test_wake_button_follows_the_cluster_mode(client, db) -> None:
    cluster = Cluster.objects.create(name="prod", server_url="https://127.0.0.1:6443")
    spec = sample_manifest("inferencemodel-mistral-7b.yaml")["spec"]
    model = InferenceModel.objects.create(cluster=cluster, name="mistral-7b", spec=spec, sync_state=SyncState.SYNCED)
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    url = f"/models/inferencemodels/{model.pk}/"
    assert f'hx-post="/api/inferencemodels/{model.pk}/wake/"' not in client.get(url).content.decode()
    cluster.managed_kinds = ["InferenceModel"]
    cluster.save()
    assert f'hx-post="/api/inferencemodels/{model.pk}/wake/"' in client.get(url).content.decode()
