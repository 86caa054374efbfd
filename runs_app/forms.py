"""Run submission: choose a config, parameters as key/value rows, a timeout."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.utils import timezone

from accounts.access import ADD, VIEW, can_act_in, restrict
from clusters.manifests import ManifestInvalid, validate_manifest
from runs_app.models import InferenceConfig, InferenceRun

PARAMETER_ROWS = 5
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class RunForm(forms.Form):
    """The configs offered are the ones the user sees; the run is created in its config's namespace."""

    config = forms.ModelChoiceField(queryset=InferenceConfig.objects.none(), label="InferenceConfig")
    name = forms.CharField(max_length=63, required=False, help_text="Empty: <config>-<date-time>.")
    timeout_seconds = forms.IntegerField(required=False, min_value=1, initial=3600, label="Timeout (seconds)")

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        self.user = user
        super().__init__(*args, **kwargs)
        configs = restrict(InferenceConfig.objects.select_related("cluster"), user, VIEW)
        self.fields["config"].queryset = configs.order_by("cluster__name", "namespace", "name")
        self.fields["config"].label_from_instance = lambda c: (
            f"{c.cluster.name} · {c.namespace}/{c.name} ({c.model_name})"
        )
        for index in range(PARAMETER_ROWS):
            self.fields[f"param_key_{index}"] = forms.CharField(required=False, label="Parameter")
            self.fields[f"param_value_{index}"] = forms.CharField(required=False, label="Value")

    def parameter_rows(self) -> list[tuple[forms.BoundField, forms.BoundField]]:
        return [(self[f"param_key_{i}"], self[f"param_value_{i}"]) for i in range(PARAMETER_ROWS)]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        config: InferenceConfig | None = data.get("config")
        if config is None:
            return data
        if not can_act_in(self.user, config.cluster_id, config.namespace, ADD):
            self.add_error(
                "config",
                f"{config.namespace!r} in cluster {config.cluster.name} is not a namespace your teams may run in",
            )
            return data
        parameters: dict[str, str] = {}
        for index in range(PARAMETER_ROWS):
            key, value = data.get(f"param_key_{index}", "").strip(), data.get(f"param_value_{index}", "")
            if not key and value:
                self.add_error(f"param_key_{index}", f"parameters: value {value!r} needs a name")
            elif key in parameters:
                self.add_error(f"param_key_{index}", f"parameters.{key}: is given twice")
            elif key:
                parameters[key] = value
        name = data.get("name") or f"{config.name}-{timezone.now():%Y%m%d-%H%M%S}"[:63].rstrip("-")
        if not _NAME.fullmatch(name):
            self.add_error("name", f"name: {name!r} must be lowercase letters, digits and '-' (a DNS label)")
            return data
        if InferenceRun.objects.filter(cluster=config.cluster, namespace=config.namespace, name=name).exists():
            self.add_error("name", f"name: {name!r} already exists in {config.cluster.name}/{config.namespace}")
            return data
        spec: dict[str, Any] = {"configRef": {"name": config.name, "namespace": config.namespace}}
        if data.get("timeout_seconds"):
            spec["timeoutSeconds"] = data["timeout_seconds"]
        if parameters:
            spec["parameters"] = parameters
        manifest = {"apiVersion": InferenceRun.kube.api_version, "kind": InferenceRun.kube.kind,
                    "metadata": {"name": name, "namespace": config.namespace}, "spec": spec}  # fmt: skip
        try:
            self.manifest = validate_manifest(InferenceRun, manifest)
        except ManifestInvalid as invalid:
            for error in invalid.errors:
                field = {"spec.timeoutSeconds": "timeout_seconds", "metadata.name": "name"}.get(error.path)
                self.add_error(field, error.message)
        return data
