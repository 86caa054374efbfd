"""What the live demo publishes in its cluster beside the reference samples: the ModelServices'
Services (their engines listed by hand), and the PriorityClasses its samples name. KubeAI Models
need no Service of the demo's: the portal is their controller there and renders ``model-<name>``,
whose Pods get engines wherever a team deploys one (devstack/pod_engines.py; issue 43: a Model
outside ``default`` answered 502 when only ``default`` had a ``kubeai`` Service): an engine per Pod
only for a Model that may scale past one replica, the shared engines for any other."""

from __future__ import annotations

from django.utils import timezone

from devstack.live_demo import MANAGED, demo_manifests, priority_classes, serving_services
from devstack.pod_engines import scales
from models_app.models import KubeAIModel


def test_the_demo_serves_its_modelservices_and_controls_kubeai_models() -> None:
    manifests = demo_manifests("http://127.0.0.1:9", timezone.now())
    model_services = {(m["metadata"]["namespace"], m["metadata"]["name"]) for m, _ in manifests
                      if m["kind"] == "ModelService"}  # fmt: skip
    assert model_services and set(serving_services(manifests)) == model_services
    assert KubeAIModel.kube.kind in MANAGED
    kubeai = [(manifest, status) for manifest, status in manifests if manifest["kind"] == KubeAIModel.kube.kind]
    assert kubeai and all(status is None for _, status in kubeai)  # the portal writes their status


def test_the_priority_classes_the_samples_name_are_made() -> None:
    manifests = demo_manifests("http://127.0.0.1:9", timezone.now())
    named = {m["spec"]["priorityClassName"] for m, _ in manifests if m["spec"].get("priorityClassName")}
    assert named and priority_classes(manifests) == sorted(named)


def test_only_the_demo_models_that_scale_get_an_engine_per_pod() -> None:
    """Docs/demo.md step 8's Model scales (maxReplicas 3) and so does one with maxReplicas 2; one held
    at one replica (maxReplicas 1) and one whose autoscaling is off share the demo's engines."""
    specs = {m["metadata"]["name"]: m["spec"] for m, _ in demo_manifests("http://127.0.0.1:9", timezone.now())
             if m["kind"] == KubeAIModel.kube.kind}  # fmt: skip
    assert {name for name, spec in specs.items() if scales(spec)} == {"llama-3.1-8b-instruct-fp8-l4",
                                                                      "nomic-embed-text"}
    assert scales({"minReplicas": 0})  # no maxReplicas: KubeAI sets no bound
