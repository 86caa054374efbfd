"""The model page's memory chart: history from right-sizing when there is some, else today's figures."""

from __future__ import annotations

import pygal

from common.charts import chart, render
from models_app.models import InferenceModel
from scheduler.public import model_chart
from scheduler.rightsizing.models import Observation

GI = 1024**3


def memory_chart(model: InferenceModel) -> str:
    """Declared vs observed memory (GiB) as inline SVG; empty when nothing is known to compare."""
    history = list(Observation.objects.filter(kind=model.kube.kind, object_id=model.pk).order_by("observed_at"))
    if history:
        return model_chart(f"{model.namespace}/{model.name}: memory (GiB)", history)
    if model.memory_bytes is None or model.observed_peak_bytes is None:
        return ""
    graph = chart(pygal.HorizontalBar, title="Memory (GiB): declared vs observed peak", height=200)
    graph.add("Declared", [round(model.memory_bytes / GI, 1)])
    graph.add("Observed peak", [round(model.observed_peak_bytes / GI, 1)])
    return render(graph)
