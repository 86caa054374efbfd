"""Paging and ordering for every list endpoint."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any, NamedTuple

from django.core.exceptions import FieldDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.paginator import EmptyPage, Page, Paginator
from django.db import connections
from django.db.models import BooleanField, Count, F, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.fields.tuple_lookups import Tuple, TupleGreaterThan, TupleLessThan
from django.utils.functional import cached_property
from rest_framework import pagination
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

from clusters.postgres_only import sorted_text_bound
from clusters.web.api.ordering import StrictOrderingFilter
from clusters.web.list_costs import Count as ListCount
from clusters.web.list_costs import bounded_count

# What a list page's rows are read from, given the list's queryset (a view's ``page_rows_queryset``).
Shown = Callable[[QuerySet], QuerySet]
# The ids of ``queryset[offset:offset + limit]`` (the list's queryset, offset, limit), read where
# the list's own order would not be read from an index: the admin's changelists sorted by a text
# column (:func:`ids_by_text_column`) or by a key kept in a table apart
# (models_app.models.UtilizationSortKey).
IdsInOrder = Callable[[QuerySet, int, int], list[int]]


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    """``limit``/``offset`` paging that stays fast at deep offsets, and ``next``/``previous`` links
    that carry a keyset ``cursor`` where the order allows one (:class:`Keyset`): a page reached by
    following them costs the same at any depth.

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

    A view may read the page's rows with more than the list's ids and counts need (a join for
    what it shows): its ``page_rows_queryset(queryset)`` gives the queryset the rows are read from.
    """

    max_limit = 1000
    estimated = False
    cursor_query_param = "cursor"
    keyset: Keyset | None = None
    page: list[Any] = []
    more_after = more_before = False

    def paginate_queryset(self, queryset: Any, request: Any, view: Any = None) -> list[Any] | None:
        if not isinstance(queryset, QuerySet):
            return super().paginate_queryset(queryset, request, view)
        self.request = request
        self.limit = self.get_limit(request)
        if self.limit is None:
            return None
        self.keyset = Keyset.of(queryset)
        shown = getattr(view, "page_rows_queryset", None)
        token = request.query_params.get(self.cursor_query_param)
        position = self._position(token) if token is not None else None
        counted, per_cluster = count_rows(queryset)
        self.count, self.estimated = counted.rows, counted.estimated
        self.offset = 0 if position is not None else self.get_offset(request)
        if self.count > self.limit and self.template is not None:
            self.display_page_controls = True
        if position is not None:
            self.page, more = self.keyset.page(queryset, position, self.limit, shown)
            self.more_after, self.more_before = (True, more) if position.before else (more, True)
        elif self.count == 0 or self.offset > self.count:
            self.page = []
        else:
            self.page = page_rows(queryset, self.offset, self.limit, per_cluster, shown)
            self.more_after, self.more_before = self.offset + self.limit < self.count, self.offset > 0
        return self.page

    def _position(self, token: str) -> Position:
        if self.keyset is None:
            raise ValidationError({self.cursor_query_param: [
                "this list's order has no cursor (it sorts by a column that may be empty, another "
                "table's, or both ways at once): use offset"]})  # fmt: skip
        return self.keyset.parse(token, self.cursor_query_param)

    def get_next_link(self) -> str | None:
        """A cursor past this page's last row where the order has one; else DRF's offset link."""
        if self.keyset is None:
            return super().get_next_link()
        if not (self.page and self.more_after):
            return None
        return self._cursor_link(self.keyset.token(self.page[-1], before=False))

    def get_previous_link(self) -> str | None:
        if self.keyset is None:
            return super().get_previous_link()
        if not (self.page and self.more_before):
            return None
        return self._cursor_link(self.keyset.token(self.page[0], before=True))

    def _cursor_link(self, token: str) -> str:
        url = remove_query_param(self.request.build_absolute_uri(), self.offset_query_param)
        return replace_query_param(url, self.cursor_query_param, token)

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


class Position(NamedTuple):
    before: bool  # the rows before ``values`` (read backwards), else those after
    values: tuple[Any, ...]  # the ordering terms' values of the row the page starts after (or ends before)


class Keyset:
    """Pages by position in a list's order: the rows past a cursor's ``(term, ...)`` values, one row
    comparison that an index on the terms answers as a range, however deep.

    Only an order whose terms all run the same way, are the list's own columns (not another
    table's, as the default order's cluster name is) and are never NULL has one: a row comparison
    skips rows whose key is NULL, and mixed directions are no single range. Other orders keep
    offset links (the default order's are answered cluster by cluster, :func:`page_rows`).
    """

    def __init__(self, model: type, terms: tuple[str, ...]) -> None:
        self.model, self.terms = model, terms
        self.descending = terms[0].startswith("-")
        self.fields = [model._meta.pk if term.lstrip("-") == "pk" else model._meta.get_field(term.lstrip("-"))
                       for term in terms]  # fmt: skip

    @classmethod
    def of(cls, queryset: QuerySet) -> Keyset | None:
        query = queryset.query
        terms = tuple(query.order_by)
        if not terms or query.distinct or not all(isinstance(term, str) for term in terms):
            return None
        if len({term.startswith("-") for term in terms}) != 1:
            return None
        try:
            keyset = cls(queryset.model, terms)
        except FieldDoesNotExist:
            return None  # another table's column (cluster__name) or an annotation
        if queryset.model._meta.pk not in keyset.fields:
            return None  # no unique term: ties could repeat or skip rows between pages
        if any(field.null or field.is_relation for field in keyset.fields):
            return None
        return keyset

    def token(self, row: Any, before: bool) -> str:
        """The cursor of the page after ``row`` (or before it)."""
        values = [getattr(row, field.attname) for field in self.fields]
        position = {"order": list(self.terms), "before": before, "values": values}
        return base64.urlsafe_b64encode(json.dumps(position, default=_exact).encode()).decode().rstrip("=")

    def parse(self, token: str, parameter: str) -> Position:
        """The position ``token`` names; a ValidationError naming ``parameter`` when it is not a
        cursor this list gave for this order."""
        wrong = ValidationError({parameter: [
            f"{token[:40]!r} is not a position in this list (follow the next and previous links; they "
            f"carry the cursor of the same order, {','.join(self.terms)!r})"]})  # fmt: skip
        try:
            position = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        except (ValueError, binascii.Error):
            raise wrong from None
        if not (isinstance(position, dict) and position.get("order") == list(self.terms)
                and isinstance(position.get("before"), bool) and isinstance(position.get("values"), list)
                and len(position["values"]) == len(self.fields)):  # fmt: skip
            raise wrong
        try:
            values = tuple(field.to_python(value) for field, value in zip(self.fields, position["values"], strict=True))
            for field, value in zip(self.fields, values, strict=True):
                field.run_validators(value)  # an integer out of the column's range is no position either
        except DjangoValidationError:
            raise wrong from None
        if any(value is None or (isinstance(value, str) and "\x00" in value) for value in values):
            raise wrong
        return Position(position["before"], values)

    def page(
        self, queryset: QuerySet, position: Position, limit: int, shown: Shown | None = None
    ) -> tuple[list[Any], bool]:
        """Up to ``limit`` rows past ``position`` in the list's order, and whether more follow them
        (before them, read backwards). Ids first from the terms' index, then those rows (read from
        ``shown(queryset)`` where given, :func:`rows_by_id`)."""
        backwards = position.before
        names = [term.lstrip("-") for term in self.terms]
        columns = Tuple(*(F(name) for name in names))
        past = (TupleLessThan if self.descending != backwards else TupleGreaterThan)(columns, position.values)
        order = [f"{'-' if self.descending != backwards else ''}{name}" for name in names]
        ids = list(queryset.filter(past).order_by(*order).values_list("pk", flat=True)[: limit + 1])
        more, ids = len(ids) > limit, ids[:limit]
        if backwards:
            ids.reverse()
        return rows_by_id(queryset, ids, shown), more


def _exact(value: Any) -> str:
    """A key value JSON has no type for, as a string its field reads back exactly (a datetime to
    the microsecond: DjangoJSONEncoder's milliseconds would skip the rows of that millisecond)."""
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def count_rows(queryset: QuerySet) -> tuple[ListCount, dict[int, int] | None]:
    """The rows of a list and, in the mirrored kinds' default order, ``{cluster id: rows}`` (which
    :func:`page_rows` walks): there the per-cluster counts, read from the (cluster, namespace, name)
    index, give the exact total; in any other order the count is bounded (clusters.web.list_costs)."""
    if cluster_order(queryset) is not None:
        per_cluster = rows_per_cluster(queryset)
        return ListCount(sum(per_cluster.values())), per_cluster
    return bounded_count(queryset), None


def page_rows(
    queryset: QuerySet,
    offset: int,
    limit: int,
    per_cluster: dict[int, int] | None = None,
    shown: Shown | None = None,
    ids_in_order: IdsInOrder | None = None,
) -> list[Any]:
    """``queryset[offset:offset + limit]`` as a deferred join: the page's ids (from an index where
    one holds the order; from ``ids_in_order(queryset)`` where another table's does), then those
    rows (:func:`rows_by_id`). ``per_cluster`` (:func:`rows_per_cluster`) when the rows are in
    cluster order, which is walked cluster by cluster (:func:`ids_in_cluster_order`)."""
    if ids_in_order is not None:
        ids = ids_in_order(queryset, offset, limit)
    elif per_cluster is None:
        ids = list(queryset.values_list("pk", flat=True)[offset : offset + limit])
    else:
        ids = ids_in_cluster_order(queryset, per_cluster, offset, limit)
    return rows_by_id(queryset, ids, shown)


def ids_by_text_column(queryset: QuerySet, offset: int, limit: int, *, column: str) -> list[int]:
    """The ids of ``queryset[offset:offset + limit]``, ordered by the text ``column`` then namespace,
    name and id (either way: ``queryset``'s own order), on PostgreSQL.

    No B-tree holds every value of a text column (an entry holds 2,704 bytes): its sort index holds
    the rows whose value is at most ``sorted_text_bound(column)`` characters, and another the ids
    of the longer ones (clusters.postgres_only.text_sort_indexes). Where no row is longer (a pool,
    a model name or a URL of over 500 characters is rare), the page is stepped to in the first from
    its entries alone, however deep; otherwise every row is sorted, as before these indexes
    (PostgreSQL 15 plans no ordered merge of the two parts: it appends and sorts them). An index on
    an expression that fits (``substr(column, 1, 500)``) kept every row but could not be read
    alone: stepping over 99,900 rows read each from the table (1.5 s at 100,000 rows)."""
    quoted = connections[queryset.db].ops.quote_name
    length = f"length({quoted(queryset.model._meta.db_table)}.{quoted(column)})"
    bound = sorted_text_bound(column)  # written into the SQL: the partial indexes' predicate, to the letter
    longer = queryset.filter(RawSQL(f"{length} > {bound}", (), output_field=BooleanField()))
    if not longer.exists():
        queryset = queryset.filter(RawSQL(f"{length} <= {bound}", (), output_field=BooleanField()))
    return list(queryset.values_list("pk", flat=True)[offset : offset + limit])


def rows_by_id(queryset: QuerySet, ids: list[int], shown: Shown | None = None) -> list[Any]:
    """The rows of ``ids``, in that order, from ``shown(queryset)`` where given: what only the shown
    rows need (a join, an annotation) stays out of the queries that found their ids and counted
    the list, which read an index alone."""
    rows = {row.pk: row for row in (queryset if shown is None else shown(queryset)).order_by().filter(pk__in=ids)}
    return [rows[pk] for pk in ids if pk in rows]


CLUSTER_ORDER = ("cluster__name", "namespace", "name")  # clusters.models.KubeObject.Meta.ordering
CLUSTER_ORDER_DESCENDING = tuple(f"-{term}" for term in CLUSTER_ORDER)  # the admin's cluster column sorted down
PK_TIE_BREAKS = ("pk", "-pk", "id", "-id")  # what Django's admin adds to make an order total


def cluster_order(queryset: QuerySet) -> str | None:
    """``""`` where the rows are listed in the mirrored kinds' default order, ``"-"`` where in its
    reverse (the admin's cluster column sorted down), else None. The order is unique (a cluster's
    name is), so a primary key added after it, as the admin's changelist does, changes nothing."""
    query = queryset.query
    ordering = tuple(query.order_by or (query.default_ordering and queryset.model._meta.ordering) or ())
    if ordering[len(CLUSTER_ORDER) :] in ((), *((tie,) for tie in PK_TIE_BREAKS)):
        ordering = ordering[: len(CLUSTER_ORDER)]
    if query.distinct:
        return None
    return {CLUSTER_ORDER: "", CLUSTER_ORDER_DESCENDING: "-"}.get(ordering)


def rows_per_cluster(queryset: QuerySet) -> dict[int, int]:
    """{cluster id: rows}, from the (cluster, namespace, name) index alone: ``COUNT(*)``, as counting
    the id (which that index does not hold) read every table row (100 ms at 100,000 rows)."""
    counted = queryset.order_by().values("cluster_id").annotate(rows=Count("*"))
    return dict(counted.values_list("cluster_id", "rows"))


def ids_in_cluster_order(queryset: QuerySet, per_cluster: dict[int, int], offset: int, limit: int) -> list[int]:
    """The ids of ``queryset[offset:offset + limit]`` in cluster order, without sorting every row.

    Clusters are few: walked in name order (reversed in the reverse order, :func:`cluster_order`,
    each cluster's rows then read backwards) by their row counts, the offset lands in one of them,
    whose rows are read in its (cluster, namespace, name) index from there, then the clusters after
    it that the page still needs, each the same way from its start. ``ORDER BY`` the cluster's name
    over the whole table sorted all 100,000 rows to return 50 (200 ms at offset 90,000); over the
    clusters after the landing one together it sorted all their rows for the one or few the page
    still needed (6 ms for one row at 100,000 models).
    """
    clusters = queryset.model._meta.get_field("cluster").related_model
    sign = cluster_order(queryset) or ""
    landing, following, needed = None, [], limit
    walk = clusters.objects.filter(pk__in=per_cluster).order_by(f"{sign}name").values_list("pk", flat=True)
    for cluster_id in walk:
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
    ids = list(_in_cluster(queryset, landing, sign)[offset : offset + limit])
    for cluster_id in following:
        ids += _in_cluster(queryset, cluster_id, sign)[: limit - len(ids)]
    return ids


def _in_cluster(queryset: QuerySet, cluster_id: int, sign: str) -> QuerySet:
    """The ids of one cluster's rows in their (namespace, name) order (``sign`` "-": reversed), which
    its index holds either way."""
    ordered = queryset.filter(cluster_id=cluster_id).order_by(f"{sign}namespace", f"{sign}name")
    return ordered.values_list("pk", flat=True)


class StableOrderingFilter(StrictOrderingFilter):
    """``?ordering=`` (refusing unknown fields) with ties broken by namespace and id, so pages never
    repeat or skip a row; the tie-breakers run the way the last term does, so a descending order is
    one index read backwards and has a keyset cursor (:class:`Keyset`).

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
        way = "-" if ordering[-1].startswith("-") else ""  # one way: an index on (key, namespace, id) read backwards
        return [*ordering, *(f"{way}{key}" for key in tie_breakers)]


class BoundedPaginator(Paginator):
    """Django's Paginator for pages of 100,000 rows (the admin's changelists, the portal's lists):
    the count is bounded (clusters.web.list_costs; ``estimated`` when it is the planner's guess,
    and the page says "about") and a page is read as a deferred join, its ids then its rows
    (:func:`page_rows`): ``OFFSET 18000`` then steps over ids in an index, not over whole rows with
    their JSON columns (a 166 MB sort spilled to disk at 100,000 rows).

    An estimate may be short of the rows there are (the planner's guess for a text filter), so a
    page reads one row more than it shows: whether a next page exists is what the rows say, and
    a page past the estimate is still served, not turned into the last one.
    """

    estimated = False
    furthest = 0  # the pages the rows read so far show to exist (an estimate may say fewer)
    ids_in_order: IdsInOrder | None = None  # where the page's ids are read, when not the list's table

    @cached_property
    def _counted(self) -> tuple[ListCount, dict[int, int] | None]:
        return count_rows(self.object_list)

    @cached_property
    def count(self) -> int:
        counted, _ = self._counted
        self.estimated = counted.estimated
        return counted.rows

    @property
    def num_pages(self) -> int:
        return max(super().num_pages, self.furthest)

    def validate_number(self, number: Any) -> int:
        """Django's checks, but past an estimated count's last page a whole number is a page still."""
        try:
            return super().validate_number(number)
        except EmptyPage:
            if self.estimated and str(number).isdigit() and int(number) >= 1:
                return int(number)
            raise

    def page(self, number: int | str) -> BoundedPage:
        number = self.validate_number(number)
        _, per_cluster = self._counted
        offset = (number - 1) * self.per_page
        found = page_rows(self.object_list, offset, self.per_page + 1, per_cluster, ids_in_order=self.ids_in_order)
        more = len(found) > self.per_page
        if more:
            self.furthest = max(self.furthest, number + 1)
        return BoundedPage(found[: self.per_page], number, self, more)


class BoundedPage(Page):
    """A page that knows from its rows whether another follows (a count may be an estimate)."""

    def __init__(self, object_list: list[Any], number: int, paginator: Paginator, more: bool) -> None:
        super().__init__(object_list, number, paginator)
        self.more = more

    def has_next(self) -> bool:
        return self.more
