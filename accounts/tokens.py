"""Issuing API tokens: one rule for the account page and ``POST /api/token/``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from accounts.models import ApiToken


class TokenLimitReached(Exception):
    """The person already holds ``API_TOKEN_LIMIT`` unexpired tokens."""


def active_tokens(user: Any):
    """The person's tokens that have not expired, newest first."""
    return ApiToken.objects.filter(user=user).filter(Q(expiry__isnull=True) | Q(expiry__gt=timezone.now()))


def issue_token(user: Any, name: str, days: int | None = None) -> tuple[ApiToken, str]:
    """A new named token expiring after ``days`` (default ``API_TOKEN_DAYS``) and its key, the only
    time the key exists outside the caller: the database keeps only its digest."""
    days = days or settings.API_TOKEN_DAYS
    if not 1 <= days <= settings.API_TOKEN_MAX_DAYS:
        raise ValueError(f"days: {days} must be between 1 and {settings.API_TOKEN_MAX_DAYS}")
    ApiToken.objects.filter(user=user, expiry__lte=timezone.now()).delete()
    if active_tokens(user).count() >= settings.API_TOKEN_LIMIT:
        raise TokenLimitReached(
            f"you already hold {settings.API_TOKEN_LIMIT} tokens (the most allowed): revoke one first"
        )
    return ApiToken.objects.create(user=user, expiry=timedelta(days=days), name=name)
