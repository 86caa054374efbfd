"""What right-sizing and planning need to know about one serving kind's pods, declared by the kind.

Each serving model class names the pod label that ties its pods to it in Prometheus
(kube-state-metrics' sanitized ``kube_pod_labels`` label) and says what one pod of an object
requests (:class:`PodResources`). Right-sizing reads only this, so a new serving kind is one model
class with ``pod_label`` and ``pod_resources()``, and no right-sizing code changes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PodResources:
    """What one pod (replica) of a serving object asks for, and how Prometheus finds its pods.

    ``label_value``: the value of the kind's pod label on the object's pods. ``memory_bytes`` and
    ``cpu_millicores``: the declared request of the model's container (None when the kind declares
    none). ``gpus``: GPUs per pod (a tensor-parallel pod holds several). ``served_model``: the
    served model's Hugging Face id when the spec names one, so its weights can be looked up.
    """

    label_value: str
    memory_bytes: int | None
    cpu_millicores: int | None
    gpus: int
    served_model: str = ""
