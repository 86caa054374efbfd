"""Guided deploy: a calculator preset becomes an InferenceModel or a KubeAI Model on a chosen pool,
its memory the calculator's, reviewed as YAML with the planner's what-if, then applied."""

from __future__ import annotations

import html
import io

import pytest
import yaml
from django.core.management import call_command
from django.test import Client

from clusters.models import AuditEntry, Cluster
from models_app.deploy import calculate
from models_app.models import InferenceModel, KubeAIModel
from scheduler.calculator.presets import preset
from tests.conftest import ALL_KIND_PERMS

pytestmark = pytest.mark.django_db
PRESET = "llama-3.1-8b-instruct"


@pytest.fixture
def deployer(make_user) -> Client:
    call_command("load_demo", stdout=io.StringIO())
    client = Client()
    client.force_login(make_user("deployer", perms=ALL_KIND_PERMS))
    return client


def review(client: Client, **fields: str) -> str:
    data = {"kind": "InferenceModel", "preset": PRESET, "cluster": "demo", "namespace": "default", "action": "review",
            "image": "vllm/vllm-openai:v0.8.0"} | fields  # fmt: skip
    response = client.post("/models/deploy/", data)
    assert response.status_code == 200, response.content.decode()[:2000]
    return response.content.decode()


def shown_yaml(page: str) -> dict:
    return yaml.safe_load(html.unescape(page.split('<pre id="deploy-yaml">')[1].split("</pre>")[0]))


def test_the_form_starts_from_the_preset_with_the_only_cluster_chosen(deployer):
    page = deployer.get("/models/deploy/", {"preset": PRESET}).content.decode()
    estimate = calculate(preset(PRESET), None).estimate
    assert '<option value="demo" selected>demo</option>' in page
    assert f"<strong>{estimate.suggested_memory}</strong>" in page
    assert "demo/gpu-l4" in page and 'data-pool="gpu-a100"' in page


def test_review_shows_the_manifest_and_the_what_if_then_deploy_applies_it(deployer):
    estimate = calculate(preset(PRESET), None).estimate
    page = review(deployer, pool="gpu-a100")
    spec = shown_yaml(page)["spec"]
    assert spec["memory"] == spec["resources"]["requests"]["memory"] == estimate.suggested_memory
    assert spec["nodeSelector"] == {"inference-pool": "gpu-a100"} and spec["resources"]["limits"]["gpu"] == "1"
    assert spec["modelName"] == preset(PRESET).hf_id
    assert 'id="deploy-plan"' in page and "fits" in page.split('id="deploy-plan"')[1][:200]
    name = shown_yaml(page)["metadata"]["name"]
    assert not InferenceModel.objects.filter(name=name).exists()  # reviewed, not applied

    data = {"kind": "InferenceModel", "preset": PRESET, "cluster": "demo", "namespace": "default", "pool": "gpu-a100",
            "action": "deploy", "image": "vllm/vllm-openai:v0.8.0"}  # fmt: skip
    response = deployer.post("/models/deploy/", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    model = InferenceModel.objects.get(name=name)
    assert response["Location"] == f"/models/inferencemodels/{model.pk}/"
    assert model.spec["memory"] == estimate.suggested_memory and model.node_pool == "gpu-a100"
    assert AuditEntry.objects.filter(object_id=model.pk, kind="InferenceModel", actor_label="deployer").exists()


def test_a_kubeai_model_gets_the_pools_resource_profile_and_bad_input_is_named(deployer):
    spec = shown_yaml(review(deployer, kind="Model", pool="gpu-l4", gpus="2"))["spec"]
    assert spec["resourceProfile"] == "nvidia-gpu-l4:2" and spec["args"] == ["--tensor-parallel-size=2"]
    assert spec["url"] == f"hf://{preset(PRESET).hf_id}" and spec["engine"] == "VLLM"
    assert not KubeAIModel.objects.filter(url=spec["url"]).exists()  # reviewed, not applied
    bad = review(deployer, pool="gpu-zz")
    assert "pool: &#x27;gpu-zz&#x27; is not a GPU pool of demo" in bad
    wrong = review(deployer, pool="gpu-a100", memory="lots")
    assert "is not a Kubernetes quantity such as 16Gi" in wrong and 'id="deploy-apply"' not in wrong


def test_the_review_says_what_will_serve_the_model_and_a_backend_url_is_used(deployer, settings):
    page = review(deployer, pool="gpu-a100")
    name = shown_yaml(page)["metadata"]["name"]
    assert shown_yaml(page)["spec"]["backendUrl"] == f"http://{name}:8000"
    assert f"the Service {name} of namespace default on port 8000" in html.unescape(page)
    assert "creates no Service" in page

    served = review(deployer, pool="gpu-a100", backend_url="http://vllm.default.svc:8000/v1")
    assert shown_yaml(served)["spec"]["backendUrl"] == "http://vllm.default.svc:8000/v1"
    assert "the server at http://vllm.default.svc:8000/v1" in html.unescape(served)
    refused = review(deployer, pool="gpu-a100", backend_url="http://169.254.169.254/")
    assert "spec.backendUrl" in html.unescape(refused) and 'id="deploy-apply"' not in refused

    settings.DEPLOY_BACKEND_URL = "http://engine.default.svc:8000"  # the installation's (the live demo's engine)
    form = deployer.get("/models/deploy/", {"preset": PRESET}).content.decode()
    assert 'value="http://engine.default.svc:8000"' in form
    kubeai = review(deployer, kind="Model", pool="gpu-l4")
    assert "the Service kubeai in namespace default" in html.unescape(kubeai)
    # where the portal is the cluster's Model controller, the Service it renders answers (the live demo)
    Cluster.objects.filter(name="demo").update(managed_kinds=["Model"])
    managed = review(deployer, kind="Model", pool="gpu-l4")
    name = shown_yaml(managed)["metadata"]["name"]
    assert f"the Service model-{name} in namespace default (port 8000)" in html.unescape(managed)
    assert "KubeAI's proxy" not in html.unescape(managed)
