"""The audit log's filters: who, kind, cluster, namespace, object name, and a from-to range of days."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from clusters.kinds import all_models
from clusters.models import AuditEntry


class AuditEntryFilterSet(django_filters.FilterSet):
    who = django_filters.CharFilter(field_name="actor_label", lookup_expr="icontains", label="Who")
    kind = django_filters.ChoiceFilter(choices=lambda: [(m.kube.kind, m.kube.kind) for m in all_models()])
    cluster = django_filters.CharFilter(field_name="cluster__name", label="Cluster name")
    namespace = django_filters.CharFilter()
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Object name")
    action = django_filters.ChoiceFilter(choices=AuditEntry.Action.choices)
    since = django_filters.DateFilter(field_name="at", lookup_expr="date__gte", label="From (day, UTC)")
    until = django_filters.DateFilter(field_name="at", lookup_expr="date__lte", label="To (day, UTC)")

    class Meta:
        model = AuditEntry
        fields = ["who", "kind", "cluster", "namespace", "q", "action", "since", "until"]

    @property
    def qs(self) -> QuerySet:
        return super().qs.select_related("cluster")
