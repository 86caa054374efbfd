"""Paging for every list endpoint."""

from rest_framework import pagination


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    """``limit`` is clamped to ``max_limit``: an unbounded one (``?limit=99999999999999999999``) goes
    into SQL as is and overflows PostgreSQL's bigint. A larger offset than there are rows is an
    empty page already."""

    max_limit = 1000
