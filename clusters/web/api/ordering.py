"""``?ordering=`` that refuses what it cannot sort by, as the portal's pages do.

DRF's OrderingFilter silently drops unknown fields, so a typo answers 200 in an order the
caller did not ask for; the portal answers 400 for the same value. Both now say which value is
wrong and which are allowed.
"""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter


def ordering_error(value: str, allowed: list[str]) -> str:
    """The one wording of a bad ordering, shared by the API and the portal's pages."""
    return f"ordering: {value!r} must be one of {', '.join(allowed)} (optionally prefixed with -)"


class StrictOrderingFilter(OrderingFilter):
    def get_ordering(self, request, queryset, view):
        given = request.query_params.get(self.ordering_param)
        if given:
            allowed = [name for name, _ in self.get_valid_fields(queryset, view, {"request": request})]
            for term in (part.strip() for part in given.split(",")):
                if term.lstrip("-") not in allowed:
                    raise ValidationError({self.ordering_param: [ordering_error(term, allowed)]})
        return super().get_ordering(request, queryset, view)
