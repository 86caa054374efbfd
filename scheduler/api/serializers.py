"""Request serializers of the planning API: every bad input is a 400 naming field, value and rule."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from clusters.models import Cluster
from clusters.validation.schemas import ManifestInvalid
from clusters.web.api.exceptions import field_error_detail
from scheduler.planning.proposals import Proposal, proposal_from_request


class ProposedModelSerializer(serializers.Serializer):
    """One proposed model: an existing one (``kind`` + ``id``), the same with ``spec`` changes
    (a JSON merge patch over its spec), or a new one (``manifest``, a whole manifest)."""

    kind = serializers.CharField(required=False, help_text="Kind of an existing model (default InferenceModel).")
    id = serializers.IntegerField(required=False, help_text="Id of an existing model in the cluster.")
    spec = serializers.DictField(required=False, help_text="Changes to the existing model's spec (merge patch).")
    manifest = serializers.DictField(required=False, help_text="A new model's manifest (InferenceModel...).")
    estimate = serializers.DictField(
        required=False,
        help_text="A model known by numbers, e.g. a calculator result: {name, namespace, pool, memory, gpus, "
        "gpu_memory, accelerator, gpu_product}.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        given = [key for key in ("manifest", "estimate", "id") if key in attrs]
        if not given:
            raise serializers.ValidationError("needs id (an existing model), manifest (a new one) or estimate")
        if len(given) > 1 or ("spec" in attrs and "id" not in attrs):
            raise serializers.ValidationError(
                "give one of manifest (a new model), estimate (numbers) or id (an existing one, with optional spec)"
            )
        return attrs


class ClusterField(serializers.SlugRelatedField):
    """A cluster by name, from the field's queryset; a Cluster the planning form's own field already
    found in the same queryset is taken as it is (looking it up again was a query and its
    compilation, ~1 ms of each what-if). A JSON body cannot hold a Cluster: API clients name one."""

    def to_internal_value(self, data: Any) -> Cluster:
        if isinstance(data, Cluster):
            return data
        return super().to_internal_value(data)


class PlanRequestSerializer(serializers.Serializer):
    cluster = ClusterField(
        slug_field="name", queryset=Cluster.objects.all(), required=False, help_text="Defaults to the only cluster."
    )
    models = ProposedModelSerializer(many=True, help_text="Models to add to what runs now.")
    include_running = serializers.BooleanField(default=True, help_text="Place the models running now as well.")
    repack = serializers.BooleanField(
        default=False, help_text="Re-pack the running models with the proposal instead of keeping them where they are."
    )
    now = serializers.DateTimeField(required=False, help_text="Reference time for idleness (default: now).")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Context ``clusters`` (a queryset) limits the clusters one may plan on: any other name is
        refused exactly as a name that does not exist. Context ``visible`` limits the namespaces."""
        super().__init__(*args, **kwargs)
        if self.context.get("clusters") is not None:
            self.fields["cluster"].queryset = self.context["clusters"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        cluster = attrs.get("cluster")
        if cluster is None:
            clusters = list(self.fields["cluster"].queryset[:2])
            if len(clusters) != 1:
                rule = f"cluster: is required when {len(clusters)} clusters exist"
                raise serializers.ValidationError({"cluster": [rule]})
            attrs["cluster"] = cluster = clusters[0]
        proposals: list[Proposal] = []
        try:
            for index, item in enumerate(attrs["models"]):
                proposals.append(proposal_from_request(item, index, cluster, self.context.get("visible")))
        except ManifestInvalid as invalid:
            raise serializers.ValidationError(field_error_detail(invalid.errors)) from None
        attrs["proposals"] = proposals
        return attrs


class PoolHolderSerializer(serializers.Serializer):
    """One model holding memory in a pool (:class:`scheduler.holdings.Holding`), as the API names it."""

    model = serializers.CharField(source="label", help_text="Kind namespace/name.")
    memory_bytes = serializers.IntegerField()
    gpus = serializers.IntegerField(source="gpu_count")


class PoolAccountSerializer(serializers.Serializer):
    """One node pool's budget accounting (:class:`scheduler.accounting.PoolAccount`): the answer of
    ``GET /api/planning/pools/`` is a list of these, and the schema says so."""

    cluster = serializers.CharField(source="cluster_name")
    pool = serializers.CharField()
    budget_bytes = serializers.IntegerField(allow_null=True, help_text="Null: no NodePool row sets a budget.")
    allocated_bytes = serializers.IntegerField()
    reserved_bytes = serializers.IntegerField()
    observed_bytes = serializers.IntegerField()
    free_bytes = serializers.IntegerField(allow_null=True, help_text="Budget less committed; null without a budget.")
    rightsizing_savings_bytes = serializers.IntegerField()
    gpus_used = serializers.IntegerField()
    holders = PoolHolderSerializer(many=True, help_text="The models the user may see; others are counted only.")
    holders_total = serializers.IntegerField()
