"""PromQL for right-sizing: one query per figure for all models of a cluster, grouped by model.

The convention (configurable in ``RIGHTSIZING``, see conf.py):

- Container metrics (cAdvisor's ``container_memory_working_set_bytes``, dcgm-exporter's
  ``DCGM_FI_DEV_FB_USED``, vLLM's KV-cache gauge) carry ``namespace`` and ``pod`` labels but not the
  pod's own labels. kube-state-metrics exports those as ``kube_pod_labels``, sanitized:
  ``inference.eh-ops.io/model`` becomes ``label_inference_eh_ops_io_model`` (it must be allowed with
  ``--metric-labels-allowlist=pods=[inference.eh-ops.io/model,llm-d.ai/model,model]``).
- Each figure is computed per pod over the window first (raw samples, no subquery), then joined
  ``on (namespace, pod)`` to the pod's model and reduced ``by (namespace, model)``. A pod's figure
  is its largest container's; a model's is its largest pod's: a model must fit in every replica.
- The model label candidates are tried in order (``or on (namespace, pod)``), so a pod labelled
  for two operators counts once.

Results are keyed by (namespace, model label value); an InferenceModel's value is its
``spec.modelName`` (the controller puts it in ``inference.eh-ops.io/model``).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.rightsizing.conf import MetricsConvention, format_duration


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _with_matcher(selector: str, matcher: str) -> str:
    """Add a label matcher to a series selector (``m{a="b"}`` or ``m``)."""
    if selector.endswith("}"):
        return selector[:-1] + ("," if selector[-2] != "{" else "") + matcher + "}"
    return f"{selector}{{{matcher}}}"


@dataclass(frozen=True)
class ModelKey:
    """A model as Prometheus sees it."""

    namespace: str
    model: str


class QueryBuilder:
    """Builds the figure queries for a window, for all models or (benchmark reference) for one."""

    def __init__(self, convention: MetricsConvention, window_seconds: int) -> None:
        self.convention = convention
        self.window = format_duration(window_seconds)

    def _model_map(self, only: ModelKey | None) -> str:
        """(namespace, pod) -> model, for pods that existed at any time in the window."""
        parts = []
        for label in self.convention.model_labels:
            if only is None:
                matcher = f'{label}!=""'
            else:
                matcher = f"{label}={_quote(only.model)},namespace={_quote(only.namespace)}"
            series = f"last_over_time({self.convention.pod_labels_metric}{{{matcher}}}[{self.window}])"
            parts.append(f'label_replace({series}, "model", "$1", {_quote(label)}, "(.+)")')
        return "max by (namespace, pod, model) (" + " or on (namespace, pod) ".join(parts) + ")"

    def _per_model(self, function: str, metric: str, only: ModelKey | None) -> str:
        if only is not None:  # one model: narrow the series to its namespace, as a per-model query would
            metric = _with_matcher(metric, f"namespace={_quote(only.namespace)}")
        call = function if function.endswith(" ") else f"{function}("
        per_pod = f"max by (namespace, pod) ({call}{metric}[{self.window}]))"
        return f"max by (namespace, model) ({per_pod} * on (namespace, pod) group_left (model) {self._model_map(only)})"

    def memory_peak(self, percentile: float | None = None, only: ModelKey | None = None) -> str:
        if percentile is None:
            return self._per_model("max_over_time", self.convention.memory_metric, only)
        return self._per_model(f"quantile_over_time({percentile:g}, ", self.convention.memory_metric, only)

    def memory_samples(self, only: ModelKey | None = None) -> str:
        return self._per_model("count_over_time", self.convention.memory_metric, only)

    def gpu_memory_peak(self, only: ModelKey | None = None) -> str:
        return self._per_model("max_over_time", self.convention.gpu_memory_metric, only)

    def kv_cache_peak(self, only: ModelKey | None = None) -> str:
        return self._per_model("max_over_time", self.convention.kv_cache_metric, only)
