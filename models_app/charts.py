"""The model page's memory chart: history from right-sizing when there is some, else today's figures."""

from __future__ import annotations

import pygal
from pygal.style import CleanStyle

from models_app.models import InferenceModel
from scheduler.rightsizing.charts import model_chart
from scheduler.rightsizing.models import Observation

GI = 1024**3


def memory_chart(model: InferenceModel) -> str:
    """Declared vs observed memory (GiB) as inline SVG; empty when nothing is known to compare."""
    history = list(Observation.objects.filter(model=model).order_by("observed_at"))
    if history:
        return model_chart(f"{model.namespace}/{model.name}: memory (GiB)", history)
    if model.memory_bytes is None or model.observed_peak_bytes is None:
        return ""
    chart = pygal.HorizontalBar(
        title="Memory (GiB): declared vs observed peak", style=CleanStyle, js=[], height=200, width=800,
        explicit_size=False,
    )  # fmt: skip
    chart.add("Declared", [round(model.memory_bytes / GI, 1)])
    chart.add("Observed peak", [round(model.observed_peak_bytes / GI, 1)])
    return chart.render(is_unicode=True, disable_xml_declaration=True)
