"""The portal banner's budget warnings (governance.budgets.warnings_for): the budgets of the user's
own teams at 80% or more, in the teams' order and each team's models in theirs; another team's,
or a user in no team, none."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from accounts.models import Team
from governance.budgets import warnings_for
from governance.limits import budget_key, month_bounds
from governance.models import Limit

pytestmark = pytest.mark.django_db


def used(limits_redis, limit: Limit, tokens: int) -> None:
    month, _ = month_bounds(datetime.now(UTC).timestamp())
    limits_redis.set(budget_key(limit.scope, month), tokens)


def test_the_users_teams_budgets_at_80_percent_in_order(make_user, limits_redis) -> None:
    zeta, alpha, other = (Team.objects.create(name=name) for name in ("zeta", "alpha", "other"))
    user = make_user("member", teams=[zeta, alpha])
    for team, model, tokens in ((zeta, "", 900), (alpha, "m-2", 950), (alpha, "m-1", 800), (alpha, "", 100),
                                (other, "", 990)):  # fmt: skip
        used(limits_redis, Limit.objects.create(team=team, model=model, monthly_tokens=1000), tokens)
    Limit.objects.create(team=zeta, model="unbudgeted", requests_per_minute=5)
    assert [(use.team, use.model, use.percent) for use in warnings_for(user.pk)] == [
        ("alpha", "m-1", 80), ("alpha", "m-2", 95), ("zeta", "", 90)]  # fmt: skip
    assert warnings_for(make_user("loner", teams=[]).pk) == []


def test_the_banner_names_each_warned_team(client, make_user, limits_redis) -> None:
    team = Team.objects.create(name="team-a")
    used(limits_redis, Limit.objects.create(team=team, model="llm", monthly_tokens=1000), 1000)
    client.force_login(make_user("reader", teams=[team]))
    page = client.get("/account/").content.decode()
    (banner,) = re.findall(r'<p class="callout budget-warning".*?</p>', page, re.S)
    assert (
        '<a href="/teams/team-a/usage/">team-a</a>' in banner and "100% of its monthly token budget for llm" in banner
    )
