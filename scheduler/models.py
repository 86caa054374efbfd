"""Node pools, their nodes, and memory reservations: the tables budgets and admission work on."""

from __future__ import annotations

from django.core.exceptions import ValidationError
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
    def without_nodes(self) -> bool:
        """Read from the cluster's Nodes and none is left (all gone, or cordoned): a pool models may
        still name (their nodeSelector) but nothing can run in. Staff-made pools (``manual``) are
        their figures and count as set (issue 43: the demo's gpu-h100 on a kwok cluster without
        H100s showed 16 GPUs used)."""
        return self.source == self.Source.NODES and not self.node_count

    @property
    def effective_budget_bytes(self) -> int:
        """What models may declare in the pool: staff's budget, else the allocatable memory; nothing
        in a pool :attr:`without_nodes`, whatever budget staff set (no capacity is counted where
        nothing can run, so nothing is admitted or planned into it)."""
        if self.without_nodes:
            return 0
        return self.budget_bytes if self.budget_bytes is not None else self.allocatable_bytes

    def reserved(self) -> tuple[dict[tuple[str, int, str, str], int], dict[tuple[str, int, str, str], int]]:
        """(memory, GPUs) reserved per model key ``(kind, cluster id, namespace, name)``: one query."""
        memory, gpus = {}, {}
        for kind, namespace, name, amount, count in self.reservations.values_list(
            "kind", "namespace", "name", "memory_bytes", "gpus"
        ):
            key = (kind, self.cluster_id, namespace, name)
            memory[key] = amount
            if count:
                gpus[key] = count
        return memory, gpus


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


class TeamQuota(models.Model):
    """A team's share of one node pool: guaranteed memory and GPUs, and how far beyond it may borrow.

    Admission (:mod:`scheduler.admission.quotas`) gives a team its guaranteed share first; beyond it the
    team borrows what other teams leave unused, up to the borrowing limit (empty: no limit but the
    pool). When a team's demand within its guarantee finds the pool full, borrowers' idle models
    are scaled to zero first; if that is not enough the quota is marked ``reclaiming_since`` and
    every other team's new borrowing in the pool is refused, naming this quota, until the team is
    admitted or the claim lapses (:data:`scheduler.admission.quotas.RECLAIM_HOLD`).
    """

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="quotas")
    pool = models.ForeignKey(NodePool, on_delete=models.CASCADE, related_name="quotas")
    guaranteed_bytes = models.BigIntegerField(default=0, help_text="Declared model memory guaranteed to the team.")
    guaranteed_gpus = models.PositiveIntegerField(default=0, help_text="GPUs guaranteed to the team.")
    borrowing_limit_bytes = models.BigIntegerField(
        null=True, blank=True, help_text="Memory the team may use beyond its guarantee; empty: no limit."
    )
    borrowing_limit_gpus = models.PositiveIntegerField(
        null=True, blank=True, help_text="GPUs the team may use beyond its guarantee; empty: no limit."
    )
    reclaiming_since = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="Last time a demand within the guarantee found the pool full."
    )

    class Meta:
        ordering = ["pool", "team__name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "pool"], name="uniq_quota_per_team_and_pool"),
            models.CheckConstraint(condition=models.Q(guaranteed_bytes__gte=0), name="quota_guarantee_not_negative"),
            models.CheckConstraint(
                condition=models.Q(borrowing_limit_bytes__isnull=True) | models.Q(borrowing_limit_bytes__gte=0),
                name="quota_borrowing_limit_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team}/{self.pool}"

    def clean(self) -> None:
        """The guarantees of a pool's quotas together fit the pool: a guarantee the pool cannot
        honour for every team at once is no guarantee. Errors name the field, the value and the rule."""
        if not self.pool_id:
            return
        pool = self.pool
        others = TeamQuota.objects.filter(pool=pool).exclude(pk=self.pk)
        totals = others.aggregate(memory=models.Sum("guaranteed_bytes"), gpus=models.Sum("guaranteed_gpus"))
        errors = {}
        if self.guaranteed_bytes is not None and self.guaranteed_bytes < 0:
            errors["guaranteed_bytes"] = f"guaranteed_bytes: {self.guaranteed_bytes} must not be negative"
        memory = (totals["memory"] or 0) + (self.guaranteed_bytes or 0)
        if memory > pool.effective_budget_bytes:
            errors["guaranteed_bytes"] = (
                f"guaranteed_bytes: {format_bytes(self.guaranteed_bytes or 0)} brings the guarantees in pool {pool} "
                f"to {format_bytes(memory)}, over its budget of {format_bytes(pool.effective_budget_bytes)}"
            )
        gpus = (totals["gpus"] or 0) + (self.guaranteed_gpus or 0)
        if gpus > pool.gpu_count:
            errors["guaranteed_gpus"] = (
                f"guaranteed_gpus: {self.guaranteed_gpus} brings the guarantees in pool {pool} to {gpus} GPUs, "
                f"over its {pool.gpu_count} GPUs"
            )
        if errors:
            raise ValidationError(errors)


class PoolTotal(models.Model):
    """Models of one serving kind in one pool and run state, and the sums of what they hold.

    Kept current by PostgreSQL triggers on every serving kind's table (:mod:`scheduler.pool_totals`,
    which documents the rules), never written by the application; pages read these few rows
    instead of summing every model per request.
    """

    class State(models.TextChoices):
        REPORTED = "reported", "Replicas reported by the cluster"
        DESIRED = "desired", "Replicas desired, none reported"
        STOPPED = "stopped", "Stopped"

    kind = models.CharField(max_length=64)
    cluster_id = models.BigIntegerField(help_text="The models' cluster (no foreign key: its rows go with the models).")
    node_pool = models.TextField()
    state = models.CharField(max_length=8, choices=State.choices)
    model_count = models.BigIntegerField(default=0)
    memory_bytes = models.BigIntegerField(default=0, help_text="Declared memory (none declared counts 0).")
    gpus = models.BigIntegerField(default=0)
    observed_peak_bytes = models.BigIntegerField(default=0)
    advised = models.BigIntegerField(default=0, help_text="Models whose status carries a right-sizing recommendation.")

    def __str__(self) -> str:
        return f"{self.kind} {self.cluster_id}/{self.node_pool} {self.state}: {self.model_count} models"

    def runs(self, portal_controlled: bool) -> bool:
        """Whether these models hold budget: :func:`scheduler.holdings.running_condition`'s rule,
        given whether the portal controls the kind in the cluster."""
        return self.state == self.State.REPORTED or (self.state == self.State.DESIRED and not portal_controlled)


class HoldingsGeneration(models.Model):
    """Which state of a cluster's serving models a process may have cached holdings of.

    Moved by PostgreSQL triggers on every serving kind's table to a fresh value of a sequence
    whenever a statement changes what :func:`scheduler.holdings.load_holdings` reads of the
    cluster's rows but the last request (:mod:`scheduler.holdings_cache`, which documents the
    rules); never written by the application. A value is never reused, even after a rollback.
    """

    cluster_id = models.BigIntegerField(
        primary_key=True, help_text="The models' cluster (no foreign key: the row outlives a deleted cluster's models)."
    )
    generation = models.BigIntegerField()

    def __str__(self) -> str:
        return f"cluster {self.cluster_id}: generation {self.generation}"
