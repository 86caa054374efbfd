"""The portal banner's budget warning: a team of the user has used 80% of a monthly budget."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from governance.budgets import warnings_for


def budget_warnings(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"budget_warnings": warnings_for(user.teams.values_list("pk", flat=True))}
