"""What other apps may use of ``scheduler``: memory admission, pod shapes, the calculator and plans.

tests/test_architecture.py holds the other apps to this module (and ``scheduler.models``). By concern:

- **Admission and holdings** (the eh-ops controller in ``models_app`` asks before it scales a model
  up, preempts the borrowers a decision names and shows who borrows; governance samples what models
  held for showback): ``Demand``, ``AdmissionDecision``, ``admit``, ``release``, ``borrowing``,
  ``ModelKey``, ``load_holdings``, ``idle_since``.
- **Kept totals and usage** (the catalog counts every row of the serving kinds without reading
  them; the dashboard shows each pool's usage and the largest right-sizing savings):
  ``rows_by_sync_state``, ``pool_usage_of`` with ``USAGE_CLUSTER_COLUMNS``, ``pool_usage_chart``,
  ``build_report``.
- **Pod shapes and pools** (what a model's pods ask for, and on which node pool):
  ``PodShape``, ``shapes_from_json``, ``selected_product``, ``cpu_millis_of``,
  ``GPU_RESOURCE_BY_ACCELERATOR``, ``node_pool_of``, ``refresh_node_pools``.
- **Calculator, presets and plans** (the guided deploy page builds on them): ``CalculatorForm``,
  ``CalculatorRequestSerializer``, ``answer``, ``Answer``, ``Row``, ``GPU_TYPES``, ``VLLM_IMAGE``,
  ``object_name``, ``Preset``, ``preset``, ``all_presets``, ``PlanForm``, ``plan_for``, and
  ``first_page`` with ``PAGE_LIMIT`` (a plan's long lists cut as the planning page cuts them).
- **Charts and Prometheus** (the model page's right-sizing and traffic charts): ``model_chart``,
  ``PrometheusClient``, ``PrometheusError``; the status fields right-sizing writes, which the kinds
  keep through every status write: ``RIGHTSIZING_STATUS_FIELDS``.
"""

from scheduler.admission.admit import NEVER_FITS, AdmissionDecision, Demand, admit, borrowing, release
from scheduler.admission.usage import USAGE_CLUSTER_COLUMNS, pool_usage_of
from scheduler.calculator.answer import Answer, Row, answer
from scheduler.calculator.api.serializers import CalculatorRequestSerializer
from scheduler.calculator.fit import GPU_TYPES
from scheduler.calculator.forms import CalculatorForm
from scheduler.calculator.links import VLLM_IMAGE, object_name
from scheduler.calculator.presets import Preset, all_presets, preset
from scheduler.consumption import (
    GPU_RESOURCE_BY_ACCELERATOR,
    PodShape,
    cpu_millis_of,
    selected_product,
    shapes_from_json,
)
from scheduler.forms import PlanForm
from scheduler.holdings import ModelKey, load_holdings
from scheduler.idle import idle_since
from scheduler.planning.charts import pool_usage_chart
from scheduler.planning.pages import PAGE_LIMIT, first_page
from scheduler.pool_totals import rows_by_sync_state
from scheduler.pools import node_pool_of
from scheduler.refresh import refresh_node_pools
from scheduler.rightsizing.charts import model_chart
from scheduler.rightsizing.prometheus import PrometheusClient, PrometheusError
from scheduler.rightsizing.report import build_report
from scheduler.rightsizing.writeback import RIGHTSIZING_STATUS_FIELDS
from scheduler.views import plan_for

__all__ = [
    "GPU_RESOURCE_BY_ACCELERATOR",
    "GPU_TYPES",
    "NEVER_FITS",
    "PAGE_LIMIT",
    "RIGHTSIZING_STATUS_FIELDS",
    "USAGE_CLUSTER_COLUMNS",
    "VLLM_IMAGE",
    "AdmissionDecision",
    "Answer",
    "CalculatorForm",
    "CalculatorRequestSerializer",
    "Demand",
    "ModelKey",
    "PlanForm",
    "PodShape",
    "Preset",
    "PrometheusClient",
    "PrometheusError",
    "Row",
    "admit",
    "all_presets",
    "answer",
    "borrowing",
    "build_report",
    "cpu_millis_of",
    "first_page",
    "idle_since",
    "load_holdings",
    "model_chart",
    "node_pool_of",
    "object_name",
    "plan_for",
    "pool_usage_chart",
    "pool_usage_of",
    "preset",
    "refresh_node_pools",
    "release",
    "rows_by_sync_state",
    "selected_product",
    "shapes_from_json",
]
