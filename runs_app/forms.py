"""Run submission (a config, any number of parameters, a timeout, a cron schedule) and the
InferenceConfig page form."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.utils import timezone

from accounts.public import ADD, VIEW, can_act_in, grants_of, is_unrestricted, restrict
from clusters.validation.manifests import ManifestInvalid, validate_manifest
from clusters.web.forms import crd_enum
from clusters.web.portal import KubeObjectPageForm
from runs_app.models import InferenceConfig, InferenceRun

MIN_PARAMETER_ROWS = 3
MAX_PARAMETERS = 200  # what a ConfigMap-carried contract sensibly holds; more is a paste gone wrong
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_KEY_FIELD = re.compile(r"param_key_(\d+)")


class RunForm(forms.Form):
    """The configs offered are the ones the user sees; the run is created in its config's namespace.

    Parameters are rows ``param_key_<n>``/``param_value_<n>``, as many as the page sends (the page
    adds rows as they are needed) plus one empty row; a rerun starts from an earlier run's values.
    """

    config = forms.ModelChoiceField(queryset=InferenceConfig.objects.none(), label="InferenceConfig")
    name = forms.CharField(max_length=63, required=False, help_text="Empty: <config>-<date-time>.")
    timeout_seconds = forms.IntegerField(required=False, min_value=1, initial=3600, label="Timeout (seconds)")
    schedule = forms.CharField(
        required=False, label="Cron schedule",
        help_text="Empty: run once now. Else five fields such as '0 3 * * *' (03:00 daily, UTC) or @hourly/@daily.",
    )  # fmt: skip

    def __init__(self, *args: Any, user: Any, parameters: dict[str, str] | None = None, **kwargs: Any) -> None:
        self.user = user
        super().__init__(*args, **kwargs)
        configs = restrict(InferenceConfig.objects.select_related("cluster"), user, VIEW)
        self.fields["config"].queryset = configs.order_by("cluster__name", "namespace", "name")
        self.fields["config"].label_from_instance = lambda c: (
            f"{c.cluster.name} · {c.namespace}/{c.name} ({c.model_name})"
        )
        given = sorted(int(match[1]) for key in (self.data or {}) if (match := _KEY_FIELD.fullmatch(key)))
        self.rows_sent = given[-1] + 1 if given else 0
        rows = self.rows_sent + 1 if given else len(parameters or {}) + 1
        self.row_count = min(max(rows, MIN_PARAMETER_ROWS), MAX_PARAMETERS + 1)
        for index in range(self.row_count):
            self.fields[f"param_key_{index}"] = forms.CharField(required=False, label="Parameter")
            self.fields[f"param_value_{index}"] = forms.CharField(required=False, label="Value", strip=False)
        for index, (key, value) in enumerate((parameters or {}).items()):
            self.initial[f"param_key_{index}"], self.initial[f"param_value_{index}"] = key, value

    def empty_reason(self) -> str:
        """Why the config list is empty ("" when it is not): no team namespace, or none holding a config."""
        if self.fields["config"].queryset.exists():
            return ""
        scopes = grants_of(self.user, VIEW)
        if not scopes and not is_unrestricted(self.user):
            return ("No InferenceConfig to offer: you are in no team with a namespace, and a run uses a config of "
                    "its team's namespace. Ask platform staff to add you to a team.")  # fmt: skip
        where = "any namespace" if is_unrestricted(self.user) else "your teams' namespaces (" + ", ".join(
            sorted({namespace for _, namespace in scopes})) + ")"  # fmt: skip
        return f"No InferenceConfig to offer: {where} hold none yet, and a run needs one. Create a config first."

    def parameter_rows(self) -> list[tuple[forms.BoundField, forms.BoundField]]:
        return [(self[f"param_key_{i}"], self[f"param_value_{i}"]) for i in range(self.row_count)]

    def _parameters(self, data: dict[str, Any]) -> dict[str, str]:
        parameters: dict[str, str] = {}
        for index in range(self.row_count):
            key, value = (data.get(f"param_key_{index}") or "").strip(), data.get(f"param_value_{index}") or ""
            if not key and value:
                self.add_error(f"param_key_{index}", f"parameters: value {value!r} needs a name")
            elif key in parameters:
                self.add_error(f"param_key_{index}", f"parameters.{key}: is given twice")
            elif key:
                parameters[key] = value
        if self.rows_sent > MAX_PARAMETERS:
            self.add_error(None, f"parameters: {self.rows_sent} rows sent, at most {MAX_PARAMETERS} parameters")
        return parameters

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
        parameters = self._parameters(data)
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
        if (data.get("schedule") or "").strip():
            spec["schedule"] = data["schedule"].strip()
        manifest = {"apiVersion": InferenceRun.kube.api_version, "kind": InferenceRun.kube.kind,
                    "metadata": {"name": name, "namespace": config.namespace}, "spec": spec}  # fmt: skip
        try:
            self.manifest = validate_manifest(InferenceRun, manifest)
        except ManifestInvalid as invalid:
            for error in invalid.errors:
                self.add_error(_FIELD_OF.get(error.path.split("[")[0]), error.message)
        return data


_FIELD_OF = {"spec.timeoutSeconds": "timeout_seconds", "metadata.name": "name", "spec.schedule": "schedule"}


class InferenceConfigPageForm(KubeObjectPageForm):
    """An InferenceConfig: the KServe endpoint and runner image as fields, storage (schemaless in
    the CRD, passed to the runner unmodified) in the YAML of the rest of the spec."""

    model = InferenceConfig
    spec_fields = {
        "model_name": ("modelName",),
        "model_url": ("modelUrl",),
        "model_version": ("modelVersion",),
        "model_input_name": ("modelInputName",),
        "image": ("image",),
        "auto_delete_policy": ("autoDeletePolicy",),
        "credentials": ("credentialsRef", "name"),
    }

    model_name = forms.CharField(label="KServe model name", required=False, help_text="e.g. sklearn-iris")
    model_url = forms.CharField(
        label="KServe endpoint", required=False,
        help_text="Host and path without scheme, e.g. sklearn-iris-predictor.kserve-test.svc.cluster.local/v2/…",
    )  # fmt: skip
    model_version = forms.CharField(label="Protocol version", required=False, help_text="e.g. v2")
    model_input_name = forms.CharField(label="Input tensor name", required=False)
    image = forms.CharField(label="Runner image", required=False)
    auto_delete_policy = forms.ChoiceField(
        label="Delete the Job", required=False, choices=lambda: crd_enum(InferenceConfig, "autoDeletePolicy"),
        help_text='"None" keeps it; DeleteOnSuccess after success; DeleteOnCompletion after any end.',
    )  # fmt: skip
    credentials = forms.CharField(label="Image-pull secret", required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["more_spec"].label = "Storage and more (YAML)"
        self.fields["more_spec"].help_text = (
            "storage.input and storage.output (required), passed to the runner as they are. A new config "
            "starts from the Krateo runner's layout: name your storage endpoint and paths."
        )
        if self.instance is None and "more_spec" not in self.initial:
            self.initial["more_spec"] = STORAGE_TEMPLATE


# The required storage of a new config, in the layout the Krateo runner reads (the reference
# sample's): the endpoint and paths are the team's to name.
STORAGE_TEMPLATE = """\
storage:
  input:
    krateo:
      api:
        endpointRef:
          name: my-storage-endpoint
          namespace: my-namespace
        path: /compute/input
        verb: POST
        headers:
        - 'Accept: application/json'
        - 'Content-Type: application/json'
  output:
    krateo:
      api:
        endpointRef:
          name: my-storage-endpoint
          namespace: my-namespace
        path: /compute/output
        verb: POST
        headers:
        - 'Accept: application/json'
        - 'Content-Type: application/json'
"""
