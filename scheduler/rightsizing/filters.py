"""The report's query parameters, checked once for the page, the API and the exports."""

from __future__ import annotations

from collections.abc import Mapping

from clusters.validation.schemas import FieldError, ManifestInvalid
from scheduler.rightsizing.report import SORTABLE, STATES

FILTERS = ("cluster", "namespace", "node_pool", "q", "state", "ordering")


def report_filters(params: Mapping[str, str]) -> dict[str, str]:
    """The filters given in ``params``; ManifestInvalid (a 400 naming field, value and rule) for bad ones."""
    filters = {key: params.get(key, "").strip() for key in FILTERS}
    errors = []
    if filters["state"] and filters["state"] not in STATES:
        errors.append(FieldError("state", filters["state"], "must be one of " + ", ".join(STATES)))
    if filters["ordering"] and filters["ordering"].lstrip("-") not in SORTABLE:
        errors.append(
            FieldError("ordering", filters["ordering"], "must be one of " + ", ".join(SORTABLE) + " (optionally -)")
        )
    if errors:
        raise ManifestInvalid(errors)
    return filters
