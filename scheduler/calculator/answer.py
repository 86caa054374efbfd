"""The calculator's whole answer, shared by the page and the API: the estimate, GPUs per GPU type,
the pools that can hold it now, and a create-form link for each way to serve it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from scheduler.calculator.fit import PoolFit, TypeFit, fit_in_pools, fit_per_gpu_type, pool_gpu_capacity
from scheduler.calculator.links import create_links, what_if_link
from scheduler.calculator.memory import Estimate, GPUSplit, estimate
from scheduler.calculator.presets import Preset


@dataclass
class Row:
    """One way to serve the model: a GPU type or a pool, its split and its create links."""

    label: str
    gpu_memory_bytes: int
    split: GPUSplit | None
    links: dict[str, str] = field(default_factory=dict)
    gpus_free: int | None = None  # pools only
    holds_now: bool | None = None  # pools only
    what_if: str = ""  # pools only: the planning page with this result proposed there


@dataclass
class Answer:
    estimate: Estimate
    preset: Preset | None
    gpu_types: list[Row]
    pools: list[Row]


def _links(result: Estimate, preset: Preset | None, split: GPUSplit | None, **where: str) -> dict[str, str]:
    """Links only for a split one pod can serve (tensor parallel within a node)."""
    if split is None or split.pipeline_parallel > 1:
        return {}
    return create_links(result, preset, split.tensor_parallel, **where)


def _type_row(result: Estimate, preset: Preset | None, fit: TypeFit) -> Row:
    gpu = fit.gpu
    links = _links(result, preset, fit.split, kubeai_profile=gpu.kubeai_profile, accelerator=gpu.accelerator)
    return Row(gpu.name, gpu.memory_bytes, fit.split, links)


def _pool_row(result: Estimate, preset: Preset | None, fit: PoolFit) -> Row:
    pool = fit.pool
    links = _links(result, preset, fit.split, node_pool=pool.pool)
    label = f"{pool.cluster}/{pool.pool}"
    what_if = what_if_link(result, preset, fit.split, pool.pool, pool.cluster) if fit.split else ""
    return Row(
        label, pool.gpu_memory_bytes, fit.split, links, gpus_free=pool.gpus_free, holds_now=fit.holds_now,
        what_if=what_if,
    )


def answer(estimate_kwargs: dict[str, Any], preset: Preset | None, cluster_ids: set[int] | None) -> Answer:
    """Everything the calculator says for one request; ``cluster_ids``: the pools the user may see."""
    result = estimate(**estimate_kwargs)
    heads = preset.attention_heads if preset else 0
    return Answer(
        estimate=result,
        preset=preset,
        gpu_types=[_type_row(result, preset, fit) for fit in fit_per_gpu_type(result, heads)],
        pools=[_pool_row(result, preset, fit) for fit in fit_in_pools(result, pool_gpu_capacity(cluster_ids), heads)],
    )


def answer_to_dict(result: Answer) -> dict[str, Any]:
    """The API's JSON: the estimate's fields plus the per-type and per-pool rows."""

    def row(item: Row) -> dict[str, Any]:
        split = item.split
        return {
            "label": item.label,
            "gpu_memory_bytes": item.gpu_memory_bytes,
            "fits": split is not None,
            "gpus": split.gpus if split else None,
            "tensor_parallel": split.tensor_parallel if split else None,
            "pipeline_parallel": split.pipeline_parallel if split else None,
            "per_gpu_bytes": split.per_gpu_bytes if split else None,
            **({"gpus_free": item.gpus_free, "holds_now": item.holds_now, "what_if": item.what_if}
               if item.holds_now is not None else {}),
            "create_links": item.links,
        }

    return {
        **asdict(result.estimate),
        "preset": result.preset.id if result.preset else None,
        "gpu_types": [row(item) for item in result.gpu_types],
        "pools": [row(item) for item in result.pools],
    }
