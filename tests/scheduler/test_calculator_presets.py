"""Calculator presets, GPUs per GPU type, pools that hold a model now, and the one-click hand-over
to a pre-filled create form of each serving kind (followed and saved as a browser would)."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from clusters.models import Cluster
from models_app.models import InferenceModel, KubeAIModel, ModelService
from scheduler.calculator.memory import format_count, parse_count
from scheduler.calculator.presets import all_presets
from scheduler.models import Node, NodePool
from tests.conftest import ALL_KIND_PERMS
from tests.support.html_forms import form_fields

GI = 1024**3
pytestmark = pytest.mark.django_db


def test_at_least_twenty_presets_each_citing_its_config_json():
    presets = all_presets()
    assert len(presets) >= 20
    assert len({item.id for item in presets}) == len(presets)
    for item in presets:
        assert item.source == f"https://huggingface.co/{item.hf_id}/blob/main/config.json"
    by_id = {item.id: item for item in presets}
    llama70 = by_id["llama-3.1-70b-instruct"]
    assert (llama70.layers, llama70.hidden_size, llama70.attention_heads, llama70.kv_heads, llama70.head_dim) == (
        80, 8192, 64, 8, 128,
    )  # fmt: skip
    assert by_id["mixtral-8x22b-instruct-v0.1"].experts == 8
    assert by_id["deepseek-v3"].kv_values_per_token_per_layer == 512 + 64  # MLA latent, not 2 x 128 x 128


def test_counts_are_shown_and_read_as_people_write_them():
    assert format_count(7e9) == "7B" and format_count(70553706496) == "70.6B" and format_count(560e6) == "560M"
    assert parse_count("8.03B") == 8_030_000_000 and parse_count("7e9") == 7e9 and parse_count("1.2T") == 1.2e12
    with pytest.raises(ValueError, match=r"7B, 70\.6B"):
        parse_count("seven")


def test_presets_api_lists_every_preset_and_is_in_the_schema(api_as):
    client = api_as()
    response = client.get("/api/planning/presets/")
    assert response.status_code == 200
    body = response.json()
    assert [item["id"] for item in body] == [item.id for item in all_presets()]
    llama8 = next(item for item in body if item["id"] == "llama-3.1-8b-instruct")
    assert llama8["parameters"] == 8030261248 and llama8["parameters_display"] == "8.03B"
    assert llama8["kv_values_per_token_per_layer"] == 2 * 8 * 128
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    assert "/api/planning/presets/" in schema and "kv_values_per_token_per_layer" in schema


def test_a_preset_answers_gpus_per_type_with_tensor_parallel_and_pipeline_splits(api_as):
    client = api_as()
    body = client.post("/api/planning/calculator/", {"preset": "llama-3.1-70b-instruct", "context_length": 8192},
                       format="json").json()  # fmt: skip
    # 70,553,706,496 x 2 bytes = 131.4 GiB of weights + 2 x 8 x 128 x 80 x 2 x 8,192 = 2.5 GiB of KV
    assert body["terms"][0]["bytes"] == 2 * 70553706496
    assert body["terms"][1]["bytes"] == 2 * 8 * 128 * 80 * 2 * 8192
    rows = {row["label"]: row for row in body["gpu_types"]}
    assert rows["NVIDIA H100 80GB"]["tensor_parallel"] == 2  # 67.9 GiB per GPU of 71.7 usable
    assert rows["NVIDIA H200 141GB"]["gpus"] == 2  # 134.9 GiB does not fit 126.4 usable
    assert rows["AMD MI300X 192GB"]["gpus"] == 1
    assert rows["NVIDIA L4 24GB"]["gpus"] == 8  # 17.7 GiB per GPU of 20.2 usable
    big = client.post("/api/planning/calculator/", {"preset": "llama-3.1-405b-instruct"}, format="json").json()
    h100 = next(row for row in big["gpu_types"] if row["label"] == "NVIDIA H100 80GB")
    assert (h100["tensor_parallel"], h100["pipeline_parallel"], h100["gpus"]) == (8, 2, 16)
    assert h100["create_links"] == {}  # one pod cannot span nodes: no form to pre-fill
    int4 = client.post("/api/planning/calculator/", {"preset": "llama-3.1-405b-instruct", "dtype": "awq"},
                       format="json").json()  # fmt: skip
    assert next(row for row in int4["gpu_types"] if row["label"] == "NVIDIA H100 80GB")["gpus"] == 4


def test_bad_preset_input_names_the_field(api_as):
    client = api_as()
    bad = client.post("/api/planning/calculator/", {"preset": "gpt-5", "tensor_parallel": 0}, format="json")
    assert bad.status_code == 400
    assert set(bad.json()) == {"preset", "tensor_parallel"}
    odd = client.post("/api/planning/calculator/", {"preset": "qwen2.5-7b-instruct", "tensor_parallel": 8},
                      format="json")  # fmt: skip
    assert odd.status_code == 400
    assert odd.json()["tensor_parallel"] == [
        "tensor_parallel: 8 must divide the 28 attention heads of Qwen2.5 7B Instruct"
    ]
    missing = client.post("/api/planning/calculator/", {"dtype": "bf16"}, format="json")
    assert missing.status_code == 400 and "parameters" in missing.json()


def _pool(cluster: Cluster, name: str, gpus_per_node: int, nodes: int, gpu_memory: int) -> NodePool:
    pool = NodePool.objects.create(cluster=cluster, name=name, node_count=nodes, gpu_count=gpus_per_node * nodes,
                                   gpu_memory_bytes=gpu_memory, allocatable_bytes=nodes * 512 * GI)  # fmt: skip
    for index in range(nodes):
        Node.objects.create(pool=pool, name=f"{name}-{index}", allocatable_bytes=512 * GI, gpu_count=gpus_per_node,
                            gpu_memory_bytes=gpu_memory)  # fmt: skip
    return pool


def test_pools_that_hold_it_now_count_the_gpus_every_kind_already_holds(api_as):
    cluster = Cluster.objects.create(name="gpu", auth_method=Cluster.AuthMethod.SNAPSHOT)
    _pool(cluster, "h100", gpus_per_node=4, nodes=1, gpu_memory=80 * GI)
    _pool(cluster, "l4", gpus_per_node=2, nodes=4, gpu_memory=24 * GI)
    _pool(cluster, "a100", gpus_per_node=8, nodes=1, gpu_memory=80 * GI)
    _pool(cluster, "l4-pair", gpus_per_node=2, nodes=2, gpu_memory=24 * GI)  # 4 GPUs where 8 are needed
    InferenceModel.objects.create(cluster=cluster, name="busy", spec={
        "modelName": "busy", "memory": "60Gi", "nodeSelector": {"inference-pool": "h100"},
        "resources": {"limits": {"gpu": "3"}}})  # fmt: skip
    ModelService.objects.create(cluster=cluster, name="ms", spec={
        "model": {"name": "m"}, "accelerator": {"type": "nvidia"}, "decode": {
            "replicas": 1, "parallelism": {"tensor": 4}, "nodeSelector": {"inference-pool": "a100"}}})  # fmt: skip
    body = api_as().post("/api/planning/calculator/", {"preset": "llama-3.1-70b-instruct", "context_length": 8192},
                         format="json").json()  # fmt: skip
    pools = {row["label"]: row for row in body["pools"]}
    assert (pools["gpu/h100"]["gpus"], pools["gpu/h100"]["gpus_free"], pools["gpu/h100"]["holds_now"]) == (2, 1, False)
    l4 = pools["gpu/l4"]  # 8 x 24 GiB needed, 2 per node: 4 pipeline stages, no single pod to create
    assert (l4["tensor_parallel"], l4["pipeline_parallel"], l4["holds_now"], l4["create_links"]) == (2, 4, True, {})
    pair = pools["gpu/l4-pair"]  # the same 4 stages do not fit on its 2 nodes: no split proposed there
    assert (pair["gpus"], pair["pipeline_parallel"], pair["holds_now"]) == (None, None, False)
    assert (pools["gpu/a100"]["gpus_free"], pools["gpu/a100"]["holds_now"]) == (4, True)
    link = pools["gpu/a100"]["create_links"]["InferenceModel"]
    assert "inference-pool: a100" in parse_qs(urlsplit(link).query)["more_spec"][0]


def test_what_if_from_a_result_plans_it_on_the_pool(api_as, client, make_user):
    """Issue 15: what-if takes a calculator result: one click to the planning page with it proposed."""
    cluster = Cluster.objects.create(name="gpu", auth_method=Cluster.AuthMethod.SNAPSHOT)
    _pool(cluster, "a100", gpus_per_node=8, nodes=1, gpu_memory=80 * GI)
    body = api_as().post("/api/planning/calculator/", {"preset": "llama-3.1-70b-instruct", "context_length": 8192},
                         format="json").json()  # fmt: skip
    link = body["pools"][0]["what_if"]
    client.force_login(make_user("planner", staff=True))
    page = client.get(link)
    proposed = yaml.safe_load(page.context["form"].initial["models"])
    estimate = proposed[0]["estimate"]
    assert (estimate["pool"], estimate["memory"], estimate["gpus"]) == ("a100", "135Gi", 2)
    planned = client.post("/planning/", {"cluster": "gpu", "models": page.context["form"].initial["models"]})
    assert planned.status_code == 200 and not planned.context["form"].errors
    plan = planned.context["plan"]
    assert plan["models"][0]["origin"] == "estimate" and plan["fits"] is True


@pytest.mark.parametrize(
    ("kind", "model", "check"),
    [
        ("InferenceModel", InferenceModel,
         lambda spec: (spec["memory"], spec["modelName"], spec["resources"]["limits"]["gpu"])
         == ("135Gi", "meta-llama/Llama-3.1-70B-Instruct", "2")),
        ("KubeAI Model", KubeAIModel, lambda spec: (spec["url"], spec["resourceProfile"], spec["args"])
         == ("hf://meta-llama/Llama-3.1-70B-Instruct", "nvidia-gpu-h100:2", ["--tensor-parallel-size=2"])),
        ("ModelService", ModelService, lambda spec: (spec["model"]["name"], spec["decode"]["parallelism"]["tensor"])
         == ("meta-llama/Llama-3.1-70B-Instruct", 2)),
    ],
)  # fmt: skip
def test_one_click_from_a_result_to_a_prefilled_form_that_saves(client, make_user, api_as, kind, model, check):
    Cluster.objects.create(name="snap", auth_method=Cluster.AuthMethod.SNAPSHOT)
    body = api_as().post("/api/planning/calculator/", {"preset": "llama-3.1-70b-instruct", "context_length": 8192},
                         format="json").json()  # fmt: skip
    link = next(row for row in body["gpu_types"] if row["label"] == "NVIDIA H100 80GB")["create_links"][kind]
    client.force_login(make_user("maker", perms=ALL_KIND_PERMS))
    page = client.get(link)
    assert page.status_code == 200
    fields = form_fields(page.content.decode())
    assert fields["name"] == "llama-3-1-70b-instruct"
    if kind == "ModelService":  # the model's OCI image is the user's to name
        fields["more_spec"] += "model:\n  image: registry.example.com/models/llama-3.1-70b:v1\n"
    response = client.post(link.split("?")[0], {**fields, "cluster": "snap", "namespace": "default"})
    assert response.status_code == 302, response.context["form"].errors
    saved = model.objects.get(name="llama-3-1-70b-instruct")
    assert check(saved.spec), saved.spec


def test_calculator_page_fills_a_preset_shows_counts_labels_and_errors_once(client, make_user):
    client.force_login(make_user("calc"))
    page = client.get("/calculator/?preset=mixtral-8x7b-instruct-v0.1").content.decode()
    assert 'value="46.7B"' in page and "7000000000.0" not in page
    # one select of models (the picker); the figures' form carries the one picked, hidden
    assert len(re.findall(r'<select[^>]*name="preset"', page)) == 1
    assert '<input type="hidden" name="preset" value="mixtral-8x7b-instruct-v0.1"' in page
    assert "KV cache dtype" in page and "GPU memory" in page and "Kv dtype" not in page and "Gpu memory" not in page
    fields = form_fields(page.split('id="calculator"')[1])
    result = client.post("/calculator/", fields).content.decode()
    assert "NVIDIA H100 80GB" in result and "Mixtral-8x7B-Instruct-v0.1 config.json" in result
    bad = client.post("/calculator/", {**fields, "parameters": "lots", "gpu_memory": "80GB!"}).content.decode()
    message = "parameters: &#x27;lots&#x27; is not a count like 7B, 70.6B, 560M or 7e9"
    assert bad.count(message) == 1 and bad.count("80GB!") >= 1
    assert bad.count("is not a non-negative Kubernetes quantity") == 1
