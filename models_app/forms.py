"""Portal forms of the serving kinds: the common spec entries as fields, the rest as YAML."""

from __future__ import annotations

from django import forms

from clusters.web.forms import crd_enum
from clusters.web.portal import KubeObjectPageForm
from models_app.models import InferenceModel, KubeAIModel, ModelService


class InferenceModelPageForm(KubeObjectPageForm):
    model = InferenceModel
    spec_fields = {
        "model_name": ("modelName",),
        "memory": ("memory",),
        "backend_url": ("backendUrl",),
        "max_replicas": ("maxReplicas",),
        "cooldown_period": ("cooldownPeriod",),
        "dependencies": ("dependencies",),
    }
    list_fields = ("dependencies",)

    model_name = forms.CharField(label="Model name", required=False)
    memory = forms.CharField(required=False, help_text="A Kubernetes quantity, e.g. 16Gi.")
    backend_url = forms.CharField(label="Backend URL", required=False)
    max_replicas = forms.IntegerField(required=False)
    cooldown_period = forms.CharField(required=False, help_text="e.g. 10m")
    dependencies = forms.CharField(required=False, help_text="Model names, comma-separated.")


class KubeAIModelPageForm(KubeObjectPageForm):
    model = KubeAIModel
    spec_fields = {
        "url": ("url",),
        "engine": ("engine",),
        "features": ("features",),
        "resource_profile": ("resourceProfile",),
        "min_replicas": ("minReplicas",),
        "max_replicas": ("maxReplicas",),
    }
    list_fields = ("features",)

    url = forms.CharField(required=False, help_text="e.g. hf://org/model or ollama://gemma2:2b")
    engine = forms.ChoiceField(required=False, choices=lambda: crd_enum(KubeAIModel, "engine"))
    features = forms.CharField(required=False, help_text="Comma-separated, e.g. TextGeneration")
    resource_profile = forms.CharField(required=False, help_text="e.g. nvidia-gpu-l4:1")
    min_replicas = forms.IntegerField(required=False)
    max_replicas = forms.IntegerField(required=False)


class ModelServicePageForm(KubeObjectPageForm):
    model = ModelService
    spec_fields = {
        "model_name": ("model", "name"),
        "engine_image": ("engine", "image"),
        "accelerator": ("accelerator", "type"),
        "decode_replicas": ("decode", "replicas"),
    }

    model_name = forms.CharField(label="Model name", required=False, help_text="e.g. Qwen/Qwen3-8B")
    engine_image = forms.CharField(required=False)
    accelerator = forms.ChoiceField(required=False, choices=lambda: crd_enum(ModelService, "accelerator", "type"))
    decode_replicas = forms.IntegerField(required=False)


FORMS = {form.model: form for form in (InferenceModelPageForm, KubeAIModelPageForm, ModelServicePageForm)}
