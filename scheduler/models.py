"""Node pools, their nodes, and memory reservations: the tables budgets and admission work on."""

from __future__ import annotations

from django.db import models

from clusters.models import Cluster
from clusters.validation.quantities import format_bytes


class NodePool(models.Model):
    """Nodes sharing a pool label value in one cluster, with their memory and GPUs.

    ``allocatable_bytes`` and GPU figures come from the cluster's Nodes (or demo data);
    ``budget_bytes`` is what staff allow models to declare in the pool and, when empty, the
    allocatable memory is the budget. The row is also the lock admission takes
    (``SELECT ... FOR UPDATE``), so decisions on one pool are serialized.
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
    gpu_product = models.CharField(
        max_length=253, blank=True, default="", help_text="GPU product of the nodes (nvidia.com/gpu.product)."
    )
    accelerator = models.CharField(
        max_length=32, blank=True, default="", help_text="Accelerator type: nvidia, amd, intel-gaudi or google."
    )
    budget_bytes = models.BigIntegerField(
        null=True, blank=True, help_text="Budget for declared model memory; empty means allocatable."
    )
    refreshed_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="Last time the figures were read from the cluster's Nodes."
    )

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="uniq_nodepool_per_cluster")]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.name}"

    @property
    def effective_budget_bytes(self) -> int:
        return self.budget_bytes if self.budget_bytes is not None else self.allocatable_bytes


class Node(models.Model):
    """One Kubernetes Node of a pool, with its own allocatable memory and GPUs.

    A table rather than a JSON list on NodePool because placement needs per-node capacity for
    every pool at once (one indexed query, no JSON decoding per pool), staff want to see and
    filter nodes in the admin, and a refresh replaces a pool's nodes row by row, keeping the
    pool row (and the budget staff set on it) untouched. Rows are derived from the cluster on
    every refresh; they are never edited by hand.
    """

    pool = models.ForeignKey(NodePool, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    allocatable_bytes = models.BigIntegerField(default=0)
    capacity_bytes = models.BigIntegerField(default=0)
    gpu_count = models.PositiveIntegerField(default=0)
    gpu_memory_bytes = models.BigIntegerField(default=0, help_text="Memory of one GPU; 0 when unknown.")
    gpu_product = models.CharField(max_length=253, blank=True, default="")
    accelerator = models.CharField(max_length=32, blank=True, default="")
    cpu_millis = models.BigIntegerField(default=0, help_text="Allocatable CPU in millicores; 0 when unknown.")
    schedulable = models.BooleanField(default=True, help_text="False when cordoned (spec.unschedulable).")

    class Meta:
        ordering = ["pool", "name"]
        constraints = [models.UniqueConstraint(fields=["pool", "name"], name="uniq_node_per_pool")]

    def __str__(self) -> str:
        return self.name


class MemoryReservation(models.Model):
    """Memory promised to a model by admission and not yet released.

    Admission counts reservations beside the models already running, so a model admitted a
    moment ago (its Deployment not yet up, its status not yet synced) still holds its memory and
    a second model cannot take the same bytes. The controller releases the reservation when the
    model scales to zero or is deleted.
    """

    pool = models.ForeignKey(NodePool, on_delete=models.CASCADE, related_name="reservations")
    kind = models.CharField(max_length=64)
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    memory_bytes = models.BigIntegerField()
    # GPUs promised with the memory: two GPU models starting together must not both take the last ones
    gpus = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pool", "kind", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["pool", "kind", "namespace", "name"], name="uniq_reservation_per_model")
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}: {format_bytes(self.memory_bytes)}"
