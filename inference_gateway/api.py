"""Staff's placement decisions over the REST API (``/api/gateway/...``), audited like the admin's."""

from __future__ import annotations

import copy

from rest_framework import routers, serializers, viewsets
from rest_framework.permissions import IsAdminUser

from clusters.models import AuditEntry, Cluster
from clusters.sync.audit import Actor
from inference_gateway.decisions import delete_decision, save_decision
from inference_gateway.models import BackendHost, SharedGatewayId, SharedNamespace


class DecisionSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", queryset=Cluster.objects.all())

    def validate(self, attrs):
        candidate = copy.copy(self.instance) if self.instance is not None else self.Meta.model()
        for field, value in attrs.items():
            setattr(candidate, field, value)
        candidate.full_clean()  # the model's rules and unique constraints, worded as the admin words them
        return {**attrs, **{field: getattr(candidate, field) for field in attrs}}  # as clean() normalised them


def _serializer(model):
    meta = type("Meta", (), {"model": model, "fields": ["id", *[f.name for f in model._meta.fields if f.name != "id"]]})
    return type(f"{model.__name__}Serializer", (DecisionSerializer,), {"Meta": meta})


class DecisionViewSet(viewsets.ModelViewSet):
    """Only staff read and write these; every write is audited (``inference_gateway.decisions``)."""

    permission_classes = [IsAdminUser]

    def _actor(self) -> Actor:
        return Actor.from_request(self.request, AuditEntry.Source.API)

    def perform_create(self, serializer) -> None:
        serializer.instance = save_decision(serializer.Meta.model(**serializer.validated_data), self._actor())

    def perform_update(self, serializer) -> None:
        for field, value in serializer.validated_data.items():
            setattr(serializer.instance, field, value)
        save_decision(serializer.instance, self._actor())

    def perform_destroy(self, instance) -> None:
        delete_decision(instance, self._actor())


router = routers.SimpleRouter()
for prefix, model in (("shared-namespaces", SharedNamespace), ("backend-hosts", BackendHost),
                      ("shared-gateway-ids", SharedGatewayId)):
    viewset = type(f"{model.__name__}ViewSet", (DecisionViewSet,), {
        "queryset": model.objects.select_related("cluster").order_by("pk"), "serializer_class": _serializer(model)})
    router.register(f"gateway/{prefix}", viewset, basename=f"gateway-{prefix}")

urlpatterns = router.urls
