"""Every form round-trips every sample: opening an object's edit page (form or YAML mode) and
saving it unchanged stores exactly what was there. Driven over HTTP: the page's own HTML is parsed
and posted back as a browser would."""

from __future__ import annotations

import pytest

from clusters.models import Cluster
from clusters.validation.schemas import default_manifest
from models_app.views import KINDS
from tests.conftest import ALL_KIND_PERMS, load_samples
from tests.support.html_forms import form_fields

SLUG_OF = {model.kube.kind: slug for slug, model in KINDS.items()}
SAMPLES = [(name, manifest) for name, manifest in load_samples() if manifest["kind"] in SLUG_OF]


@pytest.fixture
def editor_client(client, make_user, db):
    client.force_login(make_user("roundtrip", perms=ALL_KIND_PERMS))
    return client


@pytest.mark.parametrize("mode", ["edit", "yaml"])
@pytest.mark.parametrize(("file_name", "manifest"), SAMPLES, ids=[name for name, _ in SAMPLES])
def test_saving_a_page_unchanged_keeps_the_object_unchanged(editor_client, file_name, manifest, mode) -> None:
    model = KINDS[SLUG_OF[manifest["kind"]]]
    cluster = Cluster.objects.create(name="snap", auth_method=Cluster.AuthMethod.SNAPSHOT)
    row = model(cluster=cluster, namespace=manifest["metadata"].get("namespace", "default"),
                name=manifest["metadata"]["name"], labels=manifest["metadata"].get("labels") or {},
                spec=default_manifest(model.kube, manifest)["spec"])
    row.save()
    before = (row.spec, row.labels)
    url = f"/models/{SLUG_OF[manifest['kind']]}/{row.pk}/{mode}/"
    page = editor_client.get(url)
    assert page.status_code == 200
    response = editor_client.post(url, form_fields(page.content.decode()))
    assert response.status_code == 302, response.content.decode()[:3000]
    row.refresh_from_db()
    assert (row.spec, row.labels) == before
