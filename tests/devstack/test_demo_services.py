"""What the live demo publishes in its cluster beside the reference samples: the ModelServices'
Services (their engines listed by hand), and the PriorityClasses its samples name. KubeAI Models
need no Service of the demo's: the portal is their controller there and renders ``model-<name>``,
whose Pods get engines wherever a team deploys one (devstack/pod_engines.py; issue 43: a Model
outside ``default`` answered 502 when only ``default`` had a ``kubeai`` Service)."""

from __future__ import annotations

from django.utils import timezone

from devstack.live_demo import MANAGED, demo_manifests, priority_classes, serving_services
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
