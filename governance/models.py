"""Limits and prices staff set, the gateway's request ledger, and what models held over time.

The ledger (:class:`RequestRecord`) holds who asked which model, when, how it went and how many
tokens it took: never the prompt or the answer. On PostgreSQL its table is partitioned by month
(migration 0002, :mod:`governance.partitions`); the rows are written by the gateway in batches
(:mod:`governance.ledger`), never through the ORM on the request path.
"""

from __future__ import annotations

import uuid

from django.core.validators import MinValueValidator
from django.db import models

from accounts.models import Team

UNUSED = "unused"  # the showback's team for GPU-hours no model held
UNASSIGNED = "(no team)"  # GPU-hours of a model in a namespace no team owns


class Limit(models.Model):
    """Requests and tokens per minute, and tokens per calendar month (UTC), for one scope.

    - team and no model: everything the team sends;
    - team and a model: what the team sends to that model;
    - a model and no team: that model, whoever calls it.

    The ``api_token_*`` figures apply to each API token of the scope on its own. Empty: no limit.
    """

    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="limits",
                             help_text="Empty: every team together (then a model is required).")
    model = models.CharField(max_length=253, blank=True, default="",
                             help_text="A model's gateway id (what clients send as `model`); empty: every model.")
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    tokens_per_minute = models.PositiveBigIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    monthly_tokens = models.PositiveBigIntegerField(null=True, blank=True, validators=[MinValueValidator(1)],
                                                    help_text="Tokens per calendar month (UTC), prompt and completion.")
    api_token_requests_per_minute = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], help_text="For each API token on its own."
    )
    api_token_tokens_per_minute = models.PositiveBigIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], help_text="For each API token on its own."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team__name", "model"]
        constraints = [
            models.UniqueConstraint(fields=["team", "model"], name="governance_limit_scope_unique",
                                    nulls_distinct=False,
                                    violation_error_message="This team and model already have a limit: edit it."),
            models.CheckConstraint(condition=models.Q(team__isnull=False) | ~models.Q(model=""),
                                   name="governance_limit_has_scope",
                                   violation_error_message="A limit needs a team, a model or both."),
        ]

    def __str__(self) -> str:
        return f"{self.team or 'every team'} / {self.model or 'every model'}"

    @property
    def scope(self) -> str:
        """The counters' key: stable across edits of the row (and its re-creation)."""
        return f"{self.team_id or '*'}:{self.model or '*'}"


class GpuPrice(models.Model):
    """What one GPU-hour of a GPU product costs (its ``nvidia.com/gpu.product`` label, as node pools record it)."""

    gpu_product = models.CharField(max_length=253, unique=True,
                                   help_text="As the pools' nodes report it, e.g. NVIDIA-H100-80GB-HBM3; "
                                             "empty: pools whose product is unknown.", blank=True)
    price_per_gpu_hour = models.DecimalField(max_digits=12, decimal_places=4, validators=[MinValueValidator(0)])

    class Meta:
        ordering = ["gpu_product"]
        verbose_name = "GPU price"

    def __str__(self) -> str:
        return f"{self.gpu_product or '(unknown product)'}: {self.price_per_gpu_hour}/GPU-hour"


class TokenPrice(models.Model):
    """An optional price per million tokens of one model, charged to the teams that call it."""

    model = models.CharField(max_length=253, unique=True, help_text="The model's gateway id.")
    price_per_million_tokens = models.DecimalField(max_digits=12, decimal_places=4, validators=[MinValueValidator(0)])

    class Meta:
        ordering = ["model"]

    def __str__(self) -> str:
        return f"{self.model}: {self.price_per_million_tokens}/1M tokens"


class RequestRecord(models.Model):
    """One request through the gateway: no prompt, no answer.

    ``team`` is the name of the caller's team through which the model was reached (names, not
    keys: a deleted team's rows stay readable). Latencies are milliseconds; ``first_byte_ms`` is
    null when no answer byte was sent.
    """

    started_at = models.DateTimeField()
    team = models.CharField(max_length=63, blank=True)
    username = models.CharField(max_length=150)
    token_name = models.CharField(max_length=64, blank=True)
    model = models.CharField(max_length=253)
    cluster_id = models.IntegerField(null=True)
    namespace = models.CharField(max_length=63, blank=True)
    status = models.PositiveSmallIntegerField()
    latency_ms = models.FloatField()
    first_byte_ms = models.FloatField(null=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    stream = models.BooleanField(default=False)

    class Meta:
        indexes = [models.Index(fields=["team", "started_at"]), models.Index(fields=["started_at"])]

    def __str__(self) -> str:
        return f"{self.started_at:%Y-%m-%d %H:%M:%S} {self.team or '-'} {self.model} {self.status}"


# Columns the gateway's writer copies, in order (governance.ledger).
LEDGER_COLUMNS = ("started_at", "team", "username", "token_name", "model", "cluster_id", "namespace", "status",
                  "latency_ms", "first_byte_ms", "prompt_tokens", "completion_tokens", "stream")


class SetAsideRecord(models.Model):
    """A request record the ledger could not write even alone (and clamped to the table's columns):
    kept here, as the values it had, with the database's reason, instead of being retried forever
    and holding up every other team's rows (:mod:`governance.ledger`). Staff see them in the admin;
    ``inference_portal_usage_ledger_set_aside_rows_total`` counts them."""

    set_aside_at = models.DateTimeField(auto_now_add=True, db_index=True)
    values = models.TextField(help_text="The record's values, in the ledger's column order (JSON).")
    error = models.TextField(help_text="Why the database refused it.")

    class Meta:
        ordering = ["-set_aside_at"]

    def __str__(self) -> str:
        return f"{self.set_aside_at:%Y-%m-%d %H:%M:%S} {self.error[:80]}"


class LedgerSpool(models.Model):
    """How far a gateway's spool file (:mod:`governance.spool`) is written to the ledger: updated in
    the transaction that writes its rows, so a spool replayed after its gateway was killed resumes
    exactly after the last row written, neither losing nor repeating one."""

    name = models.CharField(max_length=255, primary_key=True, help_text="The spool file's name.")
    written_bytes = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.name}: {self.written_bytes} bytes written"


class GpuSample(models.Model):
    """What one model (or nobody: ``team == UNUSED``) held in one node pool over one sampling period.

    Written by :func:`governance.sampling.sample_holdings` every ``USAGE_SAMPLE_SECONDS``: the
    GPU-hours of the period are ``gpus * period_seconds / 3600``. ``idle`` marks a period in which
    the model held its GPUs yet served no request (the cooldown before scale to zero).
    """

    sampled_at = models.DateTimeField(db_index=True)
    period_seconds = models.PositiveIntegerField()
    team = models.CharField(max_length=63)
    model = models.CharField(max_length=253, blank=True)
    cluster_id = models.IntegerField()
    namespace = models.CharField(max_length=63, blank=True)
    node_pool = models.CharField(max_length=253)
    gpu_product = models.CharField(max_length=253, blank=True)
    gpus = models.PositiveIntegerField()
    idle = models.BooleanField(default=False)

    class Meta:
        indexes = [models.Index(fields=["team", "sampled_at"])]
        verbose_name = "GPU sample"

    def __str__(self) -> str:
        return f"{self.sampled_at:%Y-%m-%d %H:%M} {self.team} {self.model or '-'}: {self.gpus} GPUs"


class UsageSums(models.Model):
    """What every ledger rollup sums per team and model over its period: requests and tokens.
    Abstract, so the hour's and the day's tables share one definition of their figures (and the
    upserts that add to them, :mod:`governance.rollups`)."""

    team = models.CharField(max_length=63, blank=True)
    model = models.CharField(max_length=253)
    requests = models.BigIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)

    class Meta:
        abstract = True


class UsageHour(UsageSums):
    """The ledger rolled up per UTC hour, team and model: requests and tokens, kept by the ledger's
    writer in the transaction that writes the raw rows (:mod:`governance.rollups`), so every row
    is counted exactly once. Read for the hours of a range that starts or ends within a day
    (``/api/usage/?from=2026-11-03T06:00``); whole days read :class:`UsageDay`."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["hour", "team", "model"], name="governance_usagehour_key")]
        indexes = [models.Index(fields=["team", "hour"])]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H}h {self.team or '-'} {self.model}: {self.requests} requests"


class UsageDay(UsageSums):
    """The ledger rolled up per UTC day, team and model (as :class:`UsageHour`, a day at a time):
    what showback, the usage pages, the CSV and budgets read."""

    day = models.DateField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "team", "model"], name="governance_usageday_key")]
        indexes = [models.Index(fields=["team", "day"])]

    def __str__(self) -> str:
        return f"{self.day} {self.team or '-'} {self.model}: {self.requests} requests"


class UsageVersion(models.Model):
    """One row: a fresh value whenever a rollup of a day before today changes (a late batch, a
    replayed spool, a sample written around midnight, the backfill). Showback keeps what it worked
    out of past days under this value (:mod:`governance.showback`), so a past month is summed and
    priced once per change, not once per request; a day from today on is always read afresh."""

    version = models.UUIDField(default=uuid.uuid4)

    def __str__(self) -> str:
        return str(self.version)


class LatencyDay(models.Model):
    """How many of a team's requests of a UTC day took a latency in one bucket (buckets 5% wide on
    a log scale, :func:`governance.rollups.latency_bucket`): the team page's p50 and p95 per day
    without reading the ledger."""

    day = models.DateField()
    team = models.CharField(max_length=63, blank=True)
    bucket = models.SmallIntegerField()
    requests = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "team", "bucket"], name="governance_latencyday_key")]

    def __str__(self) -> str:
        return f"{self.day} {self.team or '-'} bucket {self.bucket}: {self.requests}"


class GpuDay(models.Model):
    """GPU-seconds held per UTC day, team, model, GPU product and idleness: the GPU samples rolled
    up in the transaction that writes them (:func:`governance.sampling.sample_holdings`)."""

    day = models.DateField()
    team = models.CharField(max_length=63)
    model = models.CharField(max_length=253, blank=True)
    gpu_product = models.CharField(max_length=253, blank=True)
    idle = models.BooleanField(default=False)
    gpu_seconds = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = "GPU day"
        constraints = [models.UniqueConstraint(fields=["day", "team", "model", "gpu_product", "idle"],
                                               name="governance_gpuday_key")]
        indexes = [models.Index(fields=["team", "day"])]

    def __str__(self) -> str:
        return f"{self.day} {self.team} {self.model or '-'}: {self.gpu_seconds} GPU-seconds"
