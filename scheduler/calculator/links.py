"""One click from a calculator result to a pre-filled create form of each serving kind.

The create forms take their initial values from the query string (field names of the kind's
portal form; ``more_spec`` as YAML), so the link is the whole hand-over: nothing is stored, and
the user still reviews and saves the form, where the validator checks everything as usual.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

from django.conf import settings
from django.urls import reverse

from clusters.web.forms import to_yaml
from scheduler.calculator.memory import Estimate, GPUSplit
from scheduler.calculator.presets import Preset

# The engine image the ModelService sample uses; the model's own OCI image (spec.model.image) is
# the user's to name, so the form asks for it instead of guessing.
VLLM_IMAGE = "vllm/vllm-openai:v0.8.0"
_NOT_NAME = re.compile(r"[^a-z0-9-]+")


def object_name(preset: Preset | None) -> str:
    """A valid Kubernetes name from the preset (``Llama-3.1-8B-Instruct`` -> ``llama-3-1-8b-instruct``)."""
    if preset is None:
        return ""
    return _NOT_NAME.sub("-", preset.hf_id.split("/")[-1].lower()).strip("-")[:63]


def _url(kind_slug: str, fields: dict[str, object]) -> str:
    query = {key: value for key, value in fields.items() if value not in (None, "")}
    return reverse("model-create", kwargs={"kind": kind_slug}) + "?" + urlencode(query)


def create_links(
    result: Estimate,
    preset: Preset | None,
    gpus: int,
    kubeai_profile: str = "",
    accelerator: str = "nvidia",
    node_pool: str = "",
) -> dict[str, str]:
    """Create-form URLs for InferenceModel, KubeAI Model and ModelService serving this result on
    ``gpus`` tensor-parallel GPUs (``kubeai_profile``: the KubeAI resource profile of the GPU type;
    ``node_pool``: pin the InferenceModel and the ModelService's decode pods to that pool)."""
    name, hf_id = object_name(preset), preset.hf_id if preset else ""
    args = [f"--tensor-parallel-size={gpus}"] if gpus > 1 else []
    selector = {"nodeSelector": {settings.NODE_POOL_LABEL: node_pool}} if node_pool else {}
    inference_extra = {**({"resources": {"limits": {"gpu": str(gpus)}}} if gpus else {}), **selector}
    decode = {**({"parallelism": {"tensor": gpus}} if gpus > 1 else {}), **selector}
    inference_model = {
        "name": name,
        "model_name": hf_id,
        "memory": result.suggested_memory,
        "backend_url": f"http://{name}:8000" if name else "",  # the model's Service, vLLM's port
        "max_replicas": 1,
        "more_spec": to_yaml(inference_extra),
    }
    kubeai = {
        "name": name,
        "url": f"hf://{hf_id}" if hf_id else "",
        "engine": "VLLM",
        "features": "TextGeneration",
        "resource_profile": f"{kubeai_profile}:{gpus}" if kubeai_profile and gpus else "",
        "min_replicas": 1,
        "more_spec": to_yaml({"args": args}) if args else "",
    }
    model_service = {
        "name": name,
        "model_name": hf_id,
        "engine_image": VLLM_IMAGE,
        "accelerator": accelerator,
        "decode_replicas": 1,
        "more_spec": to_yaml({"decode": decode} if decode else {}),
    }
    return {
        "InferenceModel": _url("inferencemodels", inference_model),
        "KubeAI Model": _url("kubeai-models", kubeai),
        "ModelService": _url("modelservices", model_service),
    }


def what_if_link(result: Estimate, preset: Preset | None, split: GPUSplit, pool: str, cluster: str) -> str:
    """The planning page with this result as an ``estimate`` entry on ``pool`` of ``cluster``: does it
    fit beside what runs there now, and what would make room."""
    params = {
        "cluster": cluster,
        "estimate_name": object_name(preset) or "estimated-model",
        "estimate_pool": pool,
        "estimate_memory": result.suggested_memory,
        "estimate_gpus": split.gpus,
        "estimate_gpu_memory": f"{-(-split.per_gpu_bytes * split.gpus // 2**20)}Mi",
    }
    return f"{reverse('planning')}?{urlencode(params)}"
