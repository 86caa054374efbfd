"""Node pools: the unit of memory budgeting."""

from __future__ import annotations

from django.db import models

from clusters.models import Cluster
from clusters.quantities import format_bytes


class NodePool(models.Model):
    """Nodes sharing a pool label value in one cluster, with their memory and GPUs.

    ``allocatable_bytes`` and GPU figures come from the cluster's Nodes (or demo data);
    ``budget_bytes`` is what staff allow models to declare in the pool and, when empty, the
    allocatable memory is the budget.
    """

    class Source(models.TextChoices):
        NODES = "nodes", "From the cluster's Nodes"
        MANUAL = "manual", "Set by staff"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="node_pools")
    name = models.CharField(max_length=63, help_text="Value of the pool label on the pool's nodes.")
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.MANUAL)
    node_count = models.PositiveIntegerField(default=0)
    allocatable_bytes = models.BigIntegerField(default=0)
    largest_node_bytes = models.BigIntegerField(default=0, help_text="Allocatable memory of the largest node.")
    gpu_count = models.PositiveIntegerField(default=0)
    gpu_memory_bytes = models.BigIntegerField(default=0, help_text="Memory of one GPU.")
    budget_bytes = models.BigIntegerField(
        null=True, blank=True, help_text="Budget for declared model memory; empty means allocatable."
    )

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="uniq_nodepool_per_cluster")]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.name}"

    @property
    def effective_budget_bytes(self) -> int:
        return self.budget_bytes if self.budget_bytes is not None else self.allocatable_bytes

    @property
    def budget_display(self) -> str:
        return format_bytes(self.effective_budget_bytes)
