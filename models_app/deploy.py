"""Guided deploy: "Deploy a model" as an InferenceModel or a KubeAI Model, from a calculator preset.

The person picks a preset (scheduler.calculator.presets), a pool (each with what the calculator says it
takes there: GPUs needed, free now), GPUs and an image; memory comes from the calculator with the
preset's numbers (the calculator page's own defaults for it). "Review" shows the manifest that
will be applied and the planner's what-if for it on that pool; "Deploy" saves it like YAML mode
does (clusters.portal.ManifestForm: validation, team check, audit, apply).

**What will serve it** is said before anything is applied (:func:`serving`): an InferenceModel
answers at its ``backendUrl`` (the portal's controller runs its Deployment but creates no Service),
which the form asks for, filled with ``DEPLOY_BACKEND_URL`` where the installation serves models
from a known server (the live demo's simulated engine); left empty, it is the conventional
``http://<name>:8000``, a Service of that name that the page says someone must add. A KubeAI Model
answers through KubeAI's Service ``kubeai`` of its namespace.
"""

from __future__ import annotations

from typing import Any

import yaml
from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from accounts.public import ADD, grants_of, is_unrestricted, namespace_predicate, visible_cluster_ids
from accounts.public import visible_clusters as clusters_of
from clusters.models import Cluster, KubeObject
from clusters.sync.audit import Actor
from clusters.web.forms import to_yaml
from clusters.web.portal import PORTAL, ManifestForm, obj_url, preselect_only_cluster, require_perm
from models_app.kubeai_controller import PORT as KUBEAI_ENGINE_PORT
from models_app.kubeai_controller import service_name as kubeai_service_name
from models_app.models import InferenceModel, KubeAIModel
from scheduler.public import (
    GPU_TYPES,
    PAGE_LIMIT,
    VLLM_IMAGE,
    Answer,
    CalculatorForm,
    CalculatorRequestSerializer,
    PlanForm,
    Preset,
    Row,
    all_presets,
    answer,
    first_page,
    object_name,
    plan_for,
    preset,
)

KINDS: dict[str, type[KubeObject]] = {"InferenceModel": InferenceModel, "Model": KubeAIModel}


def calculate(chosen: Preset, cluster_ids: set[int] | None) -> Answer:
    """The calculator's answer for the preset with the numbers its page fills in for it."""
    data = {key: value for key, value in CalculatorForm.initial_for(chosen).items() if value not in (None, "")}
    serializer = CalculatorRequestSerializer(data=data)
    serializer.is_valid(raise_exception=True)  # a preset's own numbers: checked when presets load
    return answer(serializer.to_estimate_kwargs(), chosen, cluster_ids)


def kubeai_profile(row: Row) -> str:
    """KubeAI's resource profile of a pool's GPUs (by their memory), "" when no known GPU type matches."""
    return next((gpu.kubeai_profile for gpu in GPU_TYPES if gpu.memory_bytes == row.gpu_memory_bytes), "")


def pool_rows(result: Answer, cluster: str) -> list[tuple[str, Row]]:
    """(pool name, the calculator's row) of each GPU pool of ``cluster``."""
    return [(row.label.split("/", 1)[1], row) for row in result.pools if row.label.split("/", 1)[0] == cluster]


class DeployForm(forms.Form):
    kind = forms.ChoiceField(choices=[("InferenceModel", "InferenceModel"), ("Model", "KubeAI Model")])
    preset = forms.ChoiceField(choices=lambda: [(item.id, item.name) for item in all_presets()])
    cluster = forms.ModelChoiceField(queryset=Cluster.objects.none(), to_field_name="name")
    namespace = forms.CharField(max_length=63)
    name = forms.CharField(max_length=63, required=False, help_text="Empty: from the preset's model id.")
    pool = forms.CharField(required=False, help_text="The node pool to run on (the table shows what fits where).")
    gpus = forms.IntegerField(min_value=0, max_value=64, required=False, label="GPUs",
                              help_text="Empty: what the calculator needs on the chosen pool.")  # fmt: skip
    image = forms.CharField(required=False, initial=VLLM_IMAGE, help_text="The serving container image.")
    memory = forms.CharField(required=False, help_text="Empty: the calculator's estimate for the preset.")
    backend_url = forms.CharField(
        required=False, label="Backend URL", max_length=2048,
        help_text="InferenceModel: the server that answers for it (the gateway sends its requests there). "
                  "Empty: http://<name>:8000, a Service of that name in its namespace, which the portal does not "
                  "create.")

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["backend_url"].initial = settings.DEPLOY_BACKEND_URL
        self.fields["cluster"].queryset = clusters_of(user).order_by("name")
        preselect_only_cluster(self.fields["cluster"], user)
        editable = sorted({ns for _, ns in grants_of(user, ADD) if ns != "*"})
        if editable and not is_unrestricted(user):
            self.fields["namespace"].initial = editable[0]
            self.fields["namespace"].help_text = "Your teams may deploy in: " + ", ".join(editable)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        chosen = preset(data["preset"])
        result = calculate(chosen, visible_cluster_ids(self.user))
        rows = pool_rows(result, data["cluster"].name)
        row = next((row for pool, row in rows if pool == data["pool"]), None)
        if data["pool"] and row is None:
            known = ", ".join(pool for pool, _ in rows) or "none with GPUs"
            self.add_error("pool", f"pool: {data['pool']!r} is not a GPU pool of {data['cluster'].name} ({known})")
            return data
        gpus = data["gpus"] if data["gpus"] is not None else (row.split.gpus if row and row.split else 1)
        memory = data["memory"] or result.estimate.suggested_memory
        name = data["name"] or object_name(chosen)
        spec = (self._inference_model if data["kind"] == "InferenceModel" else self._kubeai)(
            chosen, name, row, gpus, memory, data["image"], data["pool"]
        )
        if data["kind"] == "InferenceModel" and data["backend_url"]:
            spec["backendUrl"] = data["backend_url"]  # checked with the gateway's rules when applied
        model = KINDS[data["kind"]]
        data["manifest"] = {"apiVersion": model.kube.api_version, "kind": model.kube.kind,
                            "metadata": {"name": name, "namespace": data["namespace"]}, "spec": spec}  # fmt: skip
        data.update(result=result, rows=rows, row=row, gpus_used=gpus, memory_used=memory,
                    serving=serving(data["kind"], name, data["namespace"], spec, data["cluster"]))
        return data

    @staticmethod
    def _inference_model(chosen: Preset, name: str, row: Row | None, gpus: int, memory: str, image: str,
                         pool: str) -> dict[str, Any]:  # fmt: skip
        resources: dict[str, Any] = {"requests": {"memory": memory}}
        if gpus:
            resources["requests"]["gpu"] = resources.setdefault("limits", {})["gpu"] = str(gpus)
        spec = {"modelName": chosen.hf_id, "memory": memory, "backendUrl": f"http://{name}:8000", "maxReplicas": 1,
                "containerImage": image or VLLM_IMAGE, "resources": resources}  # fmt: skip
        if pool:
            spec["nodeSelector"] = {settings.NODE_POOL_LABEL: pool}
        return spec

    @staticmethod
    def _kubeai(chosen: Preset, name: str, row: Row | None, gpus: int, memory: str, image: str,
                pool: str) -> dict[str, Any]:  # fmt: skip
        spec: dict[str, Any] = {"url": f"hf://{chosen.hf_id}", "engine": "VLLM", "features": ["TextGeneration"],
                                "minReplicas": 1}  # fmt: skip
        profile = kubeai_profile(row) if row else ""
        if profile and gpus:
            spec["resourceProfile"] = f"{profile}:{gpus}"
        if gpus > 1:
            spec["args"] = [f"--tensor-parallel-size={gpus}"]
        if image:
            spec["image"] = image
        return spec


def serving(kind: str, name: str, namespace: str, spec: dict[str, Any], cluster: Cluster) -> str:
    """What will answer the model's requests through the gateway, in a sentence for the review: for
    a KubeAI Model, the Service the portal renders where it is the cluster's Model controller (the
    gateway's route then, ``inference_gateway.routes``), else KubeAI's proxy."""
    if kind != "InferenceModel" and cluster.manages(kind):
        return (f"the Service {kubeai_service_name(name)} in namespace {namespace} (port {KUBEAI_ENGINE_PORT}), which "
                "the portal renders in front of the Model's pods as this cluster's KubeAI controller, and which "
                "the gateway balances; the portal scales the pods on their active requests.")
    if kind != "InferenceModel":
        return (f"KubeAI's proxy, the Service kubeai in namespace {namespace} (port 80, under /openai), which "
                "the gateway reaches and which balances the Model's replicas; without KubeAI installed there, "
                "nothing answers.")
    url = spec["backendUrl"]
    if url == f"http://{name}:8000":
        return (f"the Service {name} of namespace {namespace} on port 8000 (the conventional backend URL). The "
                "portal runs the model's Deployment but creates no Service: add one that selects its pods, or "
                "give a Backend URL.")
    return f"the server at {url}: the gateway sends every request for the model there (its replicas, if a Service)."


def what_if(manifest: dict[str, Any], cluster: Cluster, user: Any) -> tuple[dict[str, Any] | None, list[str]]:
    """The planner's answer for the manifest beside what runs now, or the reasons it could not plan."""
    form = PlanForm(
        data={"cluster": cluster.name, "models": yaml.safe_dump([{"manifest": manifest}]), "include_running": "on"},
        visible=namespace_predicate(user), clusters=clusters_of(user),
    )  # fmt: skip
    shown = plan_for(form, user) if form.is_valid() else None
    # its long lists cut as the planning page cuts them: a cluster of 10,000 models lists them all
    return (first_page(shown, PAGE_LIMIT) if shown is not None else None,
            [str(error) for errors in form.errors.values() for error in errors])  # fmt: skip


@login_required
def deploy_page(request: HttpRequest) -> HttpResponse:
    """GET: the form (``?preset=&kind=`` pre-fill it). POST action=review: the manifest and the
    what-if; POST action=deploy: saved through YAML mode's form, then the model's page."""
    kind = request.POST.get("kind") or request.GET.get("kind") or "InferenceModel"
    require_perm(request, KINDS.get(kind, InferenceModel), "add")
    initial = {key: request.GET[key] for key in ("preset", "kind", "pool") if key in request.GET}
    form = DeployForm(request.POST or None, user=request.user, initial=initial)
    context: dict[str, Any] = {"form": form}
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        manifest_form = ManifestForm({"cluster": data["cluster"].name, "manifest": to_yaml(data["manifest"])},
                                     user=request.user, model=KINDS[data["kind"]])  # fmt: skip
        with transaction.atomic():
            if manifest_form.is_valid() and request.POST.get("action") == "deploy":
                return redirect(obj_url(manifest_form.save(Actor.from_request(request, PORTAL))))
        plan, plan_errors = what_if(data["manifest"], data["cluster"], request.user)
        context.update(
            manifest_yaml=to_yaml(data["manifest"]), manifest_errors=manifest_form.non_field_errors(),
            plan=plan, plan_errors=plan_errors, estimate=data["result"].estimate, rows=data["rows"],
            chosen_row=data["row"], gpus_used=data["gpus_used"], memory_used=data["memory_used"],
            serving=data["serving"],
        )  # fmt: skip
    elif form["preset"].value() and form["cluster"].value():
        chosen = preset(form["preset"].value())
        if chosen:
            result = calculate(chosen, visible_cluster_ids(request.user))
            context.update(estimate=result.estimate, rows=pool_rows(result, form["cluster"].value()))
    return render(request, "models_app/deploy.html", context)
