"""What staff decide about where models may answer and under which ids (admin and API, audited).

A model's team reaches the Services of its own namespace; these rows widen that, per cluster:

- :class:`SharedNamespace`: a namespace every team's models may point at (``vllm-server.ml-platform``
  as the reference's full example does from ``default``);
- :class:`BackendHost`: a host outside the cluster (a name, ``*.suffix``, an IP or a CIDR) that a
  ``backendUrl`` may name;
- :class:`SharedGatewayId`: a gateway id (``namespace/modelName``) that more than one object may
  serve (the same team's model in two clusters), which is otherwise refused.

Never widened, whatever these say: schemes other than http(s), link-local and metadata addresses,
the portal's own addresses, and loopback outside development (``inference_gateway.placement``).
"""

from __future__ import annotations

import ipaddress

from django.core.exceptions import ValidationError
from django.db import models

from clusters.models import Cluster
from inference_gateway.addresses import NotAnAddress, address_refusal, normalize_host
from inference_gateway.names import gateway_id_refusal


class SharedNamespace(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="shared_namespaces")
    namespace = models.CharField(max_length=63)
    note = models.CharField(max_length=255, blank=True, help_text="Why it is shared, who runs it.")

    class Meta:
        ordering = ["cluster__name", "namespace"]
        constraints = [models.UniqueConstraint(fields=["cluster", "namespace"], name="gateway_shared_namespace_unique")]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.namespace} (shared)"

    @property
    def audit_name(self) -> str:
        return self.namespace


class BackendHost(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="backend_hosts")
    host = models.CharField(
        max_length=253,
        help_text="A host name (api.example.com), a suffix (*.example.com), an IP address or a CIDR (10.8.0.0/16).",
    )
    note = models.CharField(max_length=255, blank=True, help_text="What runs there, who asked.")

    class Meta:
        ordering = ["cluster__name", "host"]
        constraints = [models.UniqueConstraint(fields=["cluster", "host"], name="gateway_backend_host_unique")]

    def __str__(self) -> str:
        return f"{self.cluster.name}: {self.host}"

    @property
    def audit_name(self) -> str:
        return self.host

    def clean(self) -> None:
        """A usable entry: a host name, ``*.suffix``, an IP or a CIDR, none of the never-allowed
        addresses; names and IPs are stored as the gateway's parser reads them
        (``inference_gateway.addresses.normalize_host``: full-width ``10.0.0.1`` is 10.0.0.1, ``127.1`` loopback)."""
        self.host = self.host.strip().lower().rstrip(".")
        if "/" in self.host:
            try:
                network = ipaddress.ip_network(self.host.strip("[]"), strict=False)
            except ValueError:
                raise ValidationError({"host": f"{self.host!r} is not a CIDR (10.8.0.0/16)"}) from None
            if network.is_link_local or network.is_loopback or network.is_unspecified or network.prefixlen == 0:
                raise ValidationError({"host": f"{self.host!r} covers loopback, link-local or every address, "
                                               "which no backend may have"})
            return
        suffix = self.host.startswith("*.")
        rule = "is not a host name with a domain (api.example.com), a suffix (*.example.com), an IP address or a CIDR"
        try:
            host, address = normalize_host(self.host[2:] if suffix else self.host.strip("[]"))
        except NotAnAddress as error:
            raise ValidationError({"host": f"{self.host!r} {rule}: it {error}"}) from None
        if address is None and "." not in host:
            raise ValidationError({"host": f"{self.host!r} {rule}"})
        if address is not None and (suffix or address_refusal(address) or address.is_loopback):
            raise ValidationError({"host": f"{self.host!r} is an address no backend may have "
                                           f"({address_refusal(address) or 'loopback'})"})
        self.host = f"*.{host}" if suffix else host


class SharedGatewayId(models.Model):
    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="shared_gateway_ids",
        help_text="The cluster whose object may serve the id although another object serves it already.",
    )
    gateway_id = models.CharField(max_length=320, help_text="namespace/modelName")
    note = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["gateway_id", "cluster__name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "gateway_id"], name="gateway_shared_id_unique")
        ]
        verbose_name = "shared gateway id"

    def __str__(self) -> str:
        return f"{self.gateway_id} (also in {self.cluster.name})"

    def clean(self) -> None:
        """Only an id the gateway can serve (``inference_gateway.names``)."""
        refused = gateway_id_refusal(self.gateway_id)
        if refused:
            raise ValidationError({"gateway_id": f"{self.gateway_id!r} {refused}"})

    @property
    def audit_name(self) -> str:
        return self.gateway_id


class ReplicaSnapshot(models.Model):
    """One gateway worker's view of one model's replicas, for the model page's replica table
    (``inference_gateway.picking.snapshot``). Why the database: the page and the gateway are other
    processes (and a gateway runs several workers, each with its own picks), the demo has no Redis,
    and a row per model and worker rewritten every few seconds costs nothing next to the catalog's
    reads; the page sums the workers' picks and takes each replica's freshest engine state."""

    kind = models.CharField(max_length=63)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    worker = models.CharField(max_length=80, help_text="host:pid of the gateway worker that wrote it")
    replicas = models.JSONField(default=list)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "cluster", "namespace", "name", "worker"],
                                               name="gateway_replica_snapshot_unique")]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name} ({self.worker})"
