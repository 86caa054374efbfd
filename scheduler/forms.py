"""Page forms; validation is the API serializers', so page and API refuse the same input the same way."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import yaml
from django import forms
from django.db.models import QuerySet
from django.forms.models import ModelChoiceIterator

from clusters.models import Cluster
from clusters.validation import yaml_input
from scheduler.api.serializers import PlanRequestSerializer

PLAN_EXAMPLE = """\
# A list, as the API's "models": existing ({kind, id}, e.g. picked in the catalog), edited
# ({kind, id, spec}), new ({manifest}) or known by numbers ({estimate}, e.g. from the calculator).
- manifest:
    apiVersion: inference.eh-ops.io/v1alpha1
    kind: InferenceModel
    metadata: {name: qwen-14b, namespace: default}
    spec:
      modelName: qwen-14b
      memory: 32Gi
      backendUrl: http://qwen-14b:8000
      nodeSelector: {inference-pool: gpu-l4}
      resources:
        requests: {cpu: "4", gpu: "2"}
        limits: {gpu: "2"}
"""


def picked_models(params: Any) -> str:
    """The models field pre-filled from the catalog (``?pick=Kind:id``, repeatable) or the
    calculator (``?estimate_memory=40Gi&estimate_gpus=1&estimate_gpu_memory=38Gi``); "" for none."""
    entries: list[dict[str, Any]] = []
    for pick in params.getlist("pick"):
        kind, _, number = pick.partition(":")
        if number.isdigit():
            entries.append({"kind": kind, "id": int(number)})
    if params.get("estimate_memory"):
        estimate = {"name": params.get("estimate_name") or "estimated-model", "namespace": "default",
                    "pool": params.get("estimate_pool") or "gpu-a100", "memory": params["estimate_memory"]}  # fmt: skip
        if (params.get("estimate_gpus") or "").isdigit():
            estimate["gpus"] = int(params["estimate_gpus"])
        if params.get("estimate_gpu_memory"):
            estimate["gpu_memory"] = params["estimate_gpu_memory"]
        entries.append({"estimate": estimate})
    if not entries:
        return ""
    return "# Picked models; edit the estimate's pool and namespace as needed.\n" + yaml.safe_dump(
        entries, sort_keys=False
    )


def _errors_into(form: forms.Form, errors: Any) -> None:
    if isinstance(errors, dict):
        for key, messages in errors.items():
            for message in messages if isinstance(messages, list) else [messages]:
                form.add_error(None, f"{key}: {message}" if not str(message).startswith(str(key)) else str(message))
    else:
        form.add_error(None, str(errors))


class _ClusterNames(ModelChoiceIterator):
    """A cluster field's choices as (name, name): a Cluster's label is its name (``__str__``) and
    its value the name (``to_field_name``). Read as names in one fetch: Django reads a model
    field's choices through a server-side cursor (three round trips), every column of each row
    (credentials decrypted), about 0.8 ms of each planning page for the select's ten options."""

    def __iter__(self) -> Iterator[tuple[str, str]]:
        if self.field.empty_label is not None:
            yield ("", self.field.empty_label)
        for name in self.queryset.values_list("name", flat=True):
            yield (name, name)


class ClusterChoiceField(forms.ModelChoiceField):
    """A cluster by name among ``queryset``: cleaned to the Cluster, offered by name (:class:`_ClusterNames`)."""

    iterator = _ClusterNames

    def __init__(self, queryset: QuerySet[Cluster], **kwargs: Any) -> None:
        super().__init__(queryset=queryset, to_field_name="name", **kwargs)


class PlanForm(forms.Form):
    cluster = ClusterChoiceField(queryset=Cluster.objects.all())
    models = forms.CharField(widget=forms.Textarea(attrs={"rows": 14, "cols": 100}), initial=PLAN_EXAMPLE)
    include_running = forms.BooleanField(required=False, initial=True, label="Place the models running now too")
    repack = forms.BooleanField(
        required=False, initial=False, label="Re-pack the running models (else they stay where they are)"
    )

    def __init__(
        self,
        *args: Any,
        visible: Callable[[int, str], bool] | None = None,
        clusters: QuerySet[Cluster] | None = None,
        **kwargs: Any,
    ) -> None:
        """``visible(cluster_id, namespace)``: where the user may plan models; ``clusters``: which
        clusters' pools they may plan on (every one when not given)."""
        super().__init__(*args, **kwargs)
        self.visible = visible
        self.clusters = clusters
        if clusters is not None:
            self.fields["cluster"].queryset = clusters

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        try:
            models = yaml_input.load(data["models"])
        except yaml.YAMLError as error:
            self.add_error("models", f"models: not YAML/JSON{yaml_input.describe(error)}")
            return data
        serializer = PlanRequestSerializer(
            data={
                "cluster": data["cluster"],  # found in the same clusters as the serializer's (not looked up again)
                "models": models,
                "include_running": data["include_running"],
                "repack": data["repack"],
            },
            context={"visible": self.visible, "clusters": self.clusters},
        )
        if not serializer.is_valid():
            _errors_into(self, serializer.errors)
        else:
            data["validated"] = serializer.validated_data
        return data
