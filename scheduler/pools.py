"""Which node pool a workload belongs to, decided one way for every kind."""

from __future__ import annotations

from typing import Any

from django.conf import settings


def node_pool_of(node_selector: Any) -> str:
    """The pool a ``nodeSelector`` names.

    Rule (deterministic, unlike the public controller whose choice followed Go map order): the
    value of the pool label (``NODE_POOL_LABEL``, default ``inference-pool``) when present; the
    other keys (``gpu-type``, ``accelerator``...) narrow nodes *within* that pool and never choose
    it. With no pool label the workload is in ``DEFAULT_NODE_POOL`` (``default``), matching the
    InferenceModel CRD's default nodeSelector.
    """
    if isinstance(node_selector, dict):
        value = node_selector.get(settings.NODE_POOL_LABEL)
        if isinstance(value, str) and value:
            return value
    return settings.DEFAULT_NODE_POOL
