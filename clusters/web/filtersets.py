"""One FilterSet per kind serves both the portal's lists and the API (NetBox's pattern)."""

from __future__ import annotations

import django_filters
from django.db.models import Q, QuerySet

from clusters.models import Cluster, SyncState


class KubeObjectFilterSet(django_filters.FilterSet):
    """Filters every mirrored kind has; ``q`` searches name, namespace and ``search_fields``."""

    search_fields: tuple[str, ...] = ()

    q = django_filters.CharFilter(method="search", label="Search")
    cluster = django_filters.CharFilter(field_name="cluster__name", label="Cluster name")
    namespace = django_filters.CharFilter()
    name = django_filters.CharFilter()
    sync_state = django_filters.MultipleChoiceFilter(choices=SyncState.choices)

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        condition = Q(name__icontains=value) | Q(namespace__icontains=value)
        for field in self.search_fields:
            condition |= Q(**{f"{field}__icontains": value})
        return queryset.filter(condition)


class ServingModelFilterSet(KubeObjectFilterSet):
    """Serving kinds add the catalog's filters: pool, engine, model name, readiness."""

    search_fields = ("model_name", "engine")

    node_pool = django_filters.CharFilter()
    engine = django_filters.CharFilter(lookup_expr="iexact")
    model_name = django_filters.CharFilter()
    ready = django_filters.BooleanFilter()


class ClusterFilterSet(django_filters.FilterSet):
    class Meta:
        model = Cluster
        fields = ["name", "auth_method", "healthy"]
