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
- GPU memory is the exception: a tensor-parallel pod's framebuffer is the *sum* over its GPUs.
  Each GPU's own peak is summed (no subquery); the shards of one model peak together, and a sum
  of peaks never understates the pod's peak. One GPU's size is its used + free framebuffer.
- CPU is a counter: its p95 is taken over a 5-minute rate sampled every 5 minutes, the one
  subquery (see cpu_policy.py for why p95).
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

    def _narrow(self, metric: str, only: ModelKey | None) -> str:
        """One model: narrow the series to its namespace, as a per-model query would."""
        return metric if only is None else _with_matcher(metric, f"namespace={_quote(only.namespace)}")

    def _by_model(self, per_pod: str, only: ModelKey | None) -> str:
        return f"max by (namespace, model) ({per_pod} * on (namespace, pod) group_left (model) {self._model_map(only)})"

    def _per_model(self, function: str, metric: str, only: ModelKey | None, across_pod: str = "max") -> str:
        call = function if function.endswith(" ") else f"{function}("
        per_pod = f"{across_pod} by (namespace, pod) ({call}{self._narrow(metric, only)}[{self.window}]))"
        return self._by_model(per_pod, only)

    def memory_peak(self, percentile: float | None = None, only: ModelKey | None = None) -> str:
        if percentile is None:
            return self._per_model("max_over_time", self.convention.memory_metric, only)
        return self._per_model(f"quantile_over_time({percentile:g}, ", self.convention.memory_metric, only)

    def memory_samples(self, only: ModelKey | None = None) -> str:
        return self._per_model("count_over_time", self.convention.memory_metric, only)

    def gpu_memory_peak(self, only: ModelKey | None = None) -> str:
        """MiB: the largest pod's framebuffer peak summed over its GPUs."""
        return self._per_model("max_over_time", self.convention.gpu_memory_metric, only, across_pod="sum")

    def gpu_memory_size(self, only: ModelKey | None = None) -> str:
        """MiB: one GPU's framebuffer (used + free), the largest GPU of the model's pods."""
        used, free = (
            self._narrow(m, only) for m in (self.convention.gpu_memory_metric, self.convention.gpu_free_metric)
        )
        total = f"last_over_time({used}[{self.window}]) + last_over_time({free}[{self.window}])"
        return self._by_model(f"max by (namespace, pod) ({total})", only)

    def oom_killed(self, only: ModelKey | None = None) -> str:
        """1 when any container of any of the model's pods was last terminated by the OOM killer."""
        return self._per_model("max_over_time", self.convention.oom_metric, only)

    def cpu_percentile(self, only: ModelKey | None = None) -> str:
        """Cores: the p95 (``cpu_percentile``) of the largest container's CPU rate over the window."""
        rate = f"rate({self._narrow(self.convention.cpu_metric, only)}[5m])"
        quantile = f"quantile_over_time({self.convention.cpu_percentile:g}, {rate}[{self.window}:5m])"
        return self._by_model(f"max by (namespace, pod) ({quantile})", only)

    def kv_cache_peak(self, only: ModelKey | None = None) -> str:
        return self._per_model("max_over_time", self.convention.kv_cache_metric, only)
