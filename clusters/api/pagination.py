"""Paging and ordering for every list endpoint."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import pagination

from clusters.api.ordering import StrictOrderingFilter


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    """``limit``/``offset`` paging that stays fast at deep offsets.

    ``limit`` is clamped to ``max_limit``: an unbounded one (``?limit=99999999999999999999``) goes
    into SQL as is and overflows PostgreSQL's bigint. A larger offset than there are rows is an
    empty page already.

    A page is read in two steps (a "deferred join"): the ids of the page first, then those rows.
    ``OFFSET 90000`` makes the database step over 90,000 rows; stepping over ids in an index that
    also holds the sort key (``name, namespace, id``, see clusters.postgres_only) reads no table
    row, where stepping over whole rows read 90,000 of them with their JSON columns.
    """

    max_limit = 1000

    def paginate_queryset(self, queryset: Any, request: Any, view: Any = None) -> list[Any] | None:
        if not isinstance(queryset, QuerySet):
            return super().paginate_queryset(queryset, request, view)
        self.request = request
        self.limit = self.get_limit(request)
        if self.limit is None:
            return None
        self.count = self.get_count(queryset)
        self.offset = self.get_offset(request)
        if self.count > self.limit and self.template is not None:
            self.display_page_controls = True
        if self.count == 0 or self.offset > self.count:
            return []
        ids = list(queryset.values_list("pk", flat=True)[self.offset : self.offset + self.limit])
        rows = {row.pk: row for row in queryset.order_by().filter(pk__in=ids)}
        return [rows[pk] for pk in ids if pk in rows]


class StableOrderingFilter(StrictOrderingFilter):
    """``?ordering=`` (refusing unknown fields) with ties broken by namespace and id, so offset pages
    never repeat or skip a row.

    Names repeat across namespaces and clusters; ordered by name alone, the database may return
    tied rows in a different order for each page.
    """

    def get_ordering(self, request: Any, queryset: QuerySet, view: Any) -> list[str] | None:
        ordering = super().get_ordering(request, queryset, view)
        if not ordering or not request.query_params.get(self.ordering_param):
            return ordering  # the model's own ordering is left as it is
        has_namespace = any(field.name == "namespace" for field in queryset.model._meta.concrete_fields)
        ordered = {key.lstrip("-") for key in ordering}
        tie_breakers = [key for key in ("namespace", "pk") if key not in ordered and (key == "pk" or has_namespace)]
        return [*ordering, *tie_breakers]
