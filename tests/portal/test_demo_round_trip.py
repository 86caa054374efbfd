"""Every demo object (``manage.py load_demo``) of every kind, opened in each of its editors (the
portal's form, its YAML editor, the admin) and saved unchanged, is written back byte for byte:
the spec's JSON text, key order included, is the text it had. (PostgreSQL's jsonb keeps its own
key order whatever is written, so the bytes are taken where the portal writes them, a
``pre_save`` receiver, as SQLite under ``make run`` stores them.)"""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.db.models.signals import pre_save

from clusters.kinds import all_models
from clusters.models import KubeObject
from clusters.web.portal import obj_url
from models_app.views import KINDS
from runs_app.models import InferenceConfig
from tests.conftest import ALL_KIND_PERMS
from tests.support.html_forms import form_fields

pytestmark = pytest.mark.django_db
SLUG_OF = {model: slug for slug, model in KINDS.items()}


def editors(obj: KubeObject) -> list[str]:
    """The edit pages of one object: the portal's form and YAML editor where the kind has them, the admin."""
    model = type(obj)
    admin = f"/admin/{model._meta.app_label}/{model._meta.model_name}/{obj.pk}/change/"
    if model in SLUG_OF:
        return [f"/models/{SLUG_OF[model]}/{obj.pk}/edit/", f"/models/{SLUG_OF[model]}/{obj.pk}/yaml/", admin]
    if model is InferenceConfig:
        return [f"/configs/{obj.pk}/edit/", f"/configs/{obj.pk}/yaml/", admin]
    return [admin]


def as_bytes(obj: KubeObject) -> tuple[bytes, bytes]:
    return json.dumps(obj.spec).encode(), json.dumps(obj.labels).encode()


@pytest.fixture
def written():
    """The (spec, labels) bytes of every mirrored object as it is saved."""
    seen: list[tuple[str, int, tuple[bytes, bytes]]] = []

    def record(sender, instance, **kwargs) -> None:
        if isinstance(instance, KubeObject):
            seen.append((instance.kube.kind, instance.pk, as_bytes(instance)))

    pre_save.connect(record, weak=False)
    yield seen
    pre_save.disconnect(record)


def test_every_demo_object_saved_unchanged_in_every_editor_keeps_its_bytes(client, make_user, written):
    call_command("load_demo", verbosity=0)
    admin = make_user("roundtrip", perms=ALL_KIND_PERMS, staff=True)
    client.force_login(admin)
    objects = [row for model in all_models() for row in model.objects.all()]
    assert len(objects) >= 14
    checked = []
    for obj in objects:
        for url in editors(obj):
            before = as_bytes(type(obj).objects.get(pk=obj.pk))
            page = client.get(url)
            assert page.status_code == 200, url
            written.clear()
            response = client.post(url, form_fields(page.content.decode()))
            assert response.status_code == 302, (url, response.content.decode()[:3000])
            saves = [data for kind, pk, data in written if (kind, pk) == (obj.kube.kind, obj.pk)]
            assert saves and all(data == before for data in saves), (url, before, saves)
            assert as_bytes(type(obj).objects.get(pk=obj.pk)) == before, url
            checked.append(url)
    assert client.get(obj_url(objects[0])).status_code == 200
    assert len(set(checked)) == 14 + 13 * 2  # every admin page; the 13 serving models and configs in the portal too
