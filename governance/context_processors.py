"""The portal banner's budget warning: a team of the user has used 80% of a monthly budget."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.http import HttpRequest

from governance.budgets import warnings_for


def budget_warnings(request: HttpRequest) -> dict[str, Any]:
    """The warnings as a callable, which a template calls where it shows the banner (the portal's
    base.html): a page without it, as every admin page, runs none of its queries."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"budget_warnings": partial(warnings_for, user.pk)}
