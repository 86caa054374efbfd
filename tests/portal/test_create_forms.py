"""Create forms: the only cluster a person sees is chosen for them, every error comes back in one
round, and a new InferenceConfig starts from a template of its required storage."""

from __future__ import annotations

import re

import pytest

from clusters.models import Cluster
from runs_app.models import InferenceConfig
from tests.support.html_forms import form_fields

pytestmark = pytest.mark.django_db
CREATE_PAGES = ("/models/inferencemodels/new/", "/models/kubeai-models/new/", "/models/modelservices/new/",
                "/models/inferencemodels/new/yaml/", "/configs/new/", "/configs/new/yaml/")  # fmt: skip


def test_the_only_cluster_is_chosen_and_two_are_left_to_choose(world):
    member = world.browser("member")
    for path in CREATE_PAGES:
        assert '<option value="east" selected>east</option>' in member.get(path).content.decode(), path
    Cluster.objects.create(name="west", auth_method=Cluster.AuthMethod.SNAPSHOT)
    staff = world.browser("staff")  # sees both
    assert "selected>east<" not in staff.get(CREATE_PAGES[0]).content.decode()


def test_every_error_of_a_create_form_comes_back_at_once(world):
    response = world.browser("member").post("/models/inferencemodels/new/", {
        "cluster": "east", "namespace": "nlp", "name": "", "model_name": "m", "memory": "16GB", "backend_url": "",
    })  # fmt: skip
    page = response.content.decode()
    assert response.status_code == 200
    assert 'id="error-name"' in page and "This field is required." in page  # the field's own
    assert "is not a namespace your teams may edit" in page.split('id="error-namespace"')[1][:300]  # the team's
    assert "is not a Kubernetes quantity such as 16Gi" in page.split('id="error-memory"')[1][:300]  # the spec's
    assert "spec.backendUrl: is required" in page.split('id="error-backend_url"')[1][:300]
    taken = world.objects[("InferenceModel", "vision")]
    again = world.browser("member").post("/models/inferencemodels/new/", {
        "cluster": "east", "namespace": "vision", "name": taken.name, "model_name": "m", "memory": "16GB",
        "backend_url": "http://m:8000",
    }).content.decode()  # fmt: skip
    assert "already" in again.split('id="error-name"')[1][:300] and 'id="error-memory"' in again


def test_a_new_config_starts_from_a_storage_template_that_saves(world):
    member = world.browser("member")
    page = member.get("/configs/new/").content.decode()
    assert "storage:\n  input:\n    krateo:" in page
    fields = form_fields(page) | {"namespace": "vision", "name": "scoring", "model_name": "sklearn-iris",
                                  "model_url": "iris.kserve.svc/v2/models/iris/infer", "image": "runner:1",
                                  "auto_delete_policy": "None"}  # fmt: skip
    response = member.post("/configs/new/", fields)
    assert response.status_code == 302, re.findall(r'class="errorlist"[^>]*>(.*?)<', response.content.decode())
    config = InferenceConfig.objects.get(name="scoring")
    assert set(config.spec["storage"]) == {"input", "output"}
