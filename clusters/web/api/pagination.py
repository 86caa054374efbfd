"""Paging and ordering for every list endpoint."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, QuerySet
from rest_framework import pagination
from rest_framework.response import Response

from clusters.web.api.ordering import StrictOrderingFilter
from clusters.web.list_costs import Count as ListCount
from clusters.web.list_costs import bounded_count


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    """``limit``/``offset`` paging that stays fast at deep offsets.

    ``count`` is exact up to ``COUNT_BOUND`` rows, then PostgreSQL's estimate (``count_estimated``
    says which, clusters.web.list_costs); in the default order it is exact, from the per-cluster
    counts the page is found with.

    ``limit`` is clamped to ``max_limit``: an unbounded one (``?limit=99999999999999999999``) goes
    into SQL as is and overflows PostgreSQL's bigint. A larger offset than there are rows is an
    empty page already.

    A page is read in two steps (a "deferred join"): the ids of the page first, then those rows.
    ``OFFSET 90000`` makes the database step over 90,000 rows; stepping over ids in an index that
    also holds the sort key (``name, namespace, id``, see clusters.postgres_only) reads no table
    row, where stepping over whole rows read 90,000 of them with their JSON columns. The mirrored
    kinds' default order (cluster name, namespace, name) has no such index, as the cluster's name
    is in another table: :func:`ids_in_cluster_order` steps over whole clusters by their counts.
    """

    max_limit = 1000
    estimated = False

    def paginate_queryset(self, queryset: Any, request: Any, view: Any = None) -> list[Any] | None:
        if not isinstance(queryset, QuerySet):
            return super().paginate_queryset(queryset, request, view)
        self.request = request
        self.limit = self.get_limit(request)
        if self.limit is None:
            return None
        counted, per_cluster = count_rows(queryset)
        self.count, self.estimated = counted.rows, counted.estimated
        self.offset = self.get_offset(request)
        if self.count > self.limit and self.template is not None:
            self.display_page_controls = True
        if self.count == 0 or self.offset > self.count:
            return []
        return page_rows(queryset, self.offset, self.limit, per_cluster)

    def get_paginated_response(self, data: Any) -> Response:
        """DRF's page, with ``count_estimated``: whether ``count`` is PostgreSQL's estimate (above
        ``clusters.web.list_costs.COUNT_BOUND`` matching rows in an order other than the default)."""
        return Response(
            {"count": self.count, "count_estimated": self.estimated, "next": self.get_next_link(),
             "previous": self.get_previous_link(), "results": data}
        )  # fmt: skip

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        described = super().get_paginated_response_schema(schema)
        described["properties"]["count_estimated"] = {"type": "boolean", "example": False}
        return described


def count_rows(queryset: QuerySet) -> tuple[ListCount, dict[int, int] | None]:
    """The rows of a list and, in the mirrored kinds' default order, ``{cluster id: rows}`` (which
    :func:`page_rows` walks): there the per-cluster counts, read from the (cluster, namespace, name)
    index, give the exact total; in any other order the count is bounded (clusters.web.list_costs)."""
    if in_cluster_order(queryset):
        per_cluster = rows_per_cluster(queryset)
        return ListCount(sum(per_cluster.values())), per_cluster
    return bounded_count(queryset), None


def page_rows(queryset: QuerySet, offset: int, limit: int, per_cluster: dict[int, int] | None = None) -> list[Any]:
    """``queryset[offset:offset + limit]`` as a deferred join: the page's ids (from an index where
    one holds the order), then those rows. ``per_cluster`` (:func:`rows_per_cluster`) when the
    rows are in cluster order, which is walked cluster by cluster (:func:`ids_in_cluster_order`)."""
    if per_cluster is None:
        ids = list(queryset.values_list("pk", flat=True)[offset : offset + limit])
    else:
        ids = ids_in_cluster_order(queryset, per_cluster, offset, limit)
    rows = {row.pk: row for row in queryset.order_by().filter(pk__in=ids)}
    return [rows[pk] for pk in ids if pk in rows]


CLUSTER_ORDER = ("cluster__name", "namespace", "name")  # clusters.models.KubeObject.Meta.ordering
PK_TIE_BREAKS = ("pk", "-pk", "id", "-id")  # what Django's admin adds to make an order total


def in_cluster_order(queryset: QuerySet) -> bool:
    """Whether the rows are listed in the mirrored kinds' default order (unique: a cluster's name is,
    so a primary key added after it, as the admin's changelist does, changes nothing)."""
    query = queryset.query
    ordering = tuple(query.order_by or (query.default_ordering and queryset.model._meta.ordering) or ())
    if ordering[len(CLUSTER_ORDER) :] in ((), *((tie,) for tie in PK_TIE_BREAKS)):
        ordering = ordering[: len(CLUSTER_ORDER)]
    return ordering == CLUSTER_ORDER and not query.distinct


def rows_per_cluster(queryset: QuerySet) -> dict[int, int]:
    """{cluster id: rows}, from the (cluster, namespace, name) index alone: ``COUNT(*)``, as counting
    the id (which that index does not hold) read every table row (100 ms at 100,000 rows)."""
    counted = queryset.order_by().values("cluster_id").annotate(rows=Count("*"))
    return dict(counted.values_list("cluster_id", "rows"))


def ids_in_cluster_order(queryset: QuerySet, per_cluster: dict[int, int], offset: int, limit: int) -> list[int]:
    """The ids of ``queryset[offset:offset + limit]`` in cluster order, without sorting every row.

    Clusters are few: walked in name order by their row counts, the offset lands in one of them,
    whose rows are read in its (cluster, namespace, name) index from there; the clusters after it
    that the page still needs are read together. ``ORDER BY`` the cluster's name over the whole
    table sorted all 100,000 rows to return 50 (200 ms at offset 90,000).
    """
    clusters = queryset.model._meta.get_field("cluster").related_model
    landing, following, needed = None, [], limit
    for cluster_id in clusters.objects.filter(pk__in=per_cluster).order_by("name").values_list("pk", flat=True):
        rows = per_cluster[cluster_id]
        if landing is None:
            if offset >= rows:
                offset -= rows
                continue
            landing, needed = cluster_id, limit - (rows - offset)
        elif needed > 0:
            following.append(cluster_id)
            needed -= rows
        if needed <= 0:
            break
    if landing is None:
        return []
    page = queryset.filter(cluster_id=landing).order_by("namespace", "name")
    ids = list(page.values_list("pk", flat=True)[offset : offset + limit])
    if following:
        rest = queryset.filter(cluster_id__in=following).order_by(*CLUSTER_ORDER)
        ids += rest.values_list("pk", flat=True)[: limit - len(ids)]
    return ids


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
