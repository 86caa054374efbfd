"""The team usage page (limits, budget, usage of a month with plots) and its CSV export.

Only the team's members and staff reach a team's pages; anyone else gets the 404 a team that does
not exist gets. ``/usage/`` lists the teams the user may look at.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render

from accounts.models import Team
from accounts.public import is_unrestricted
from governance.budgets import budget_uses
from governance.charts import usage_charts
from governance.models import Limit
from governance.showback import Showback, UsageQuery, showback, team_month

CSV_COLUMNS = ["day", "team", "model", "requests", "prompt_tokens", "completion_tokens", "gpu_hours",
               "idle_gpu_hours", "unpriced_gpu_hours", "cost", "idle_cost", "cost_per_million_tokens"]


def _team(request: HttpRequest, name: str) -> Team:
    teams = Team.objects.all() if is_unrestricted(request.user) else Team.objects.filter(members=request.user)
    team = teams.filter(name=name).first()
    if team is None:
        raise Http404("No such team of yours.")
    return team


def _month(request: HttpRequest) -> tuple[date, date, str | None]:
    """The month asked (``?month=YYYY-MM``, default this one): first and last day, and an error."""
    today = datetime.now(UTC).date()
    value = request.GET.get("month") or ""
    try:
        first = datetime.strptime(value, "%Y-%m").date() if value else today.replace(day=1)
        error = None
    except ValueError:
        first, error = today.replace(day=1), f"month: {value!r} is not a month (YYYY-MM); this month is shown"
    last = (first.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)
    return first, last, error


def _query(team: Team, first: date, last: date, by_day: bool) -> UsageQuery:
    return UsageQuery(frozenset([team.name]), None, first, last, by_day)


@login_required
def usage_index(request: HttpRequest) -> HttpResponse:
    teams = Team.objects.all() if is_unrestricted(request.user) else Team.objects.filter(members=request.user)
    return render(request, "governance/index.html", {"teams": teams})


@login_required
def team_usage(request: HttpRequest, name: str) -> HttpResponse:
    team = _team(request, name)
    first, last, error = _month(request)
    limits = list(Limit.objects.filter(team=team).select_related("team"))
    month = team_month(_query(team, first, last, by_day=True))
    context = {
        "team": team, "month": first.strftime("%Y-%m"), "month_error": error, "limits": limits,
        "budgets": budget_uses(limits), "rows": month.by_model.cells[:-1],
        "totals": month.by_model.cells[-1], "charts": usage_charts(month.daily.rows, month.latency, first, last),
        "previous": (first - timedelta(days=1)).strftime("%Y-%m"),
    }
    return render(request, "governance/team_usage.html", context, status=400 if error else 200)


class _Line:
    """What ``csv.writer`` writes to: hands back each line instead of keeping it."""

    def write(self, line: str) -> str:
        return line


def _csv_lines(found: Showback) -> Iterator[str]:
    writer = csv.DictWriter(_Line(), CSV_COLUMNS)
    yield writer.writeheader()
    for row in found.dicts:
        yield writer.writerow({key: ("" if value is None else value) for key, value in row.items()})


@login_required
def team_usage_csv(request: HttpRequest, name: str) -> HttpResponse:
    """One row per day and model of the month, from the daily rollups, streamed line by line."""
    team = _team(request, name)
    first, last, error = _month(request)
    if error:
        return HttpResponse(error + "\n", status=400, content_type="text/plain")
    response = StreamingHttpResponse(_csv_lines(showback(_query(team, first, last, by_day=True))),
                                     content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="usage-{team.name}-{first:%Y-%m}.csv"'
    return response
