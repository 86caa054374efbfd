"""One FilterSet per kind serves both the portal's lists and the API (NetBox's pattern)."""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.db import models
from django.db.models import Q, QuerySet

from clusters.models import Cluster, SyncState


class StrictNullBooleanSelect(forms.NullBooleanSelect):
    """The select, passing on a value it does not know (its own reading makes it None) for the
    field to refuse."""

    def value_from_datadict(self, data: Any, files: Any, name: str) -> Any:
        read = super().value_from_datadict(data, files, name)
        given = data.get(name)
        return given if read is None and given not in (None, "") else read


class StrictNullBooleanField(forms.NullBooleanField):
    """Django's NullBooleanField, refusing what it cannot read: its select reads any other value
    as "no value", so ``?ready=maybe`` (or ``?ready=1``) filtered nothing and answered every row
    with a 200."""

    widget = StrictNullBooleanSelect

    def to_python(self, value: Any) -> bool | None:
        if value in (None, "", "unknown"):  # unset: the select's "any" (NullBooleanSelect's "unknown")
            return None
        if value in (True, "true", "True", "1"):
            return True
        if value in (False, "false", "False", "0"):
            return False
        raise forms.ValidationError("must be true or false", code="invalid")


class StrictBooleanFilter(django_filters.BooleanFilter):
    field_class = StrictNullBooleanField


STRICT_FILTER_DEFAULTS = {
    **django_filters.FilterSet.FILTER_DEFAULTS,
    models.BooleanField: {"filter_class": StrictBooleanFilter},
}


class KubeObjectFilterSet(django_filters.FilterSet):
    """Filters every mirrored kind has; ``q`` searches name, namespace and ``search_fields``."""

    search_fields: tuple[str, ...] = ()
    FILTER_DEFAULTS = STRICT_FILTER_DEFAULTS

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
    ready = StrictBooleanFilter()


class ClusterFilterSet(django_filters.FilterSet):
    FILTER_DEFAULTS = STRICT_FILTER_DEFAULTS

    class Meta:
        model = Cluster
        fields = ["name", "auth_method", "healthy"]
