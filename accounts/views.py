"""The account page: the user's teams and grants, and their API token (created, shown once, revoked)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from rest_framework.authtoken.models import Token

from accounts.models import NamespaceGrant


def _page(request: HttpRequest, new_key: str | None = None) -> HttpResponse:
    token = Token.objects.filter(user=request.user).first()
    grants = NamespaceGrant.objects.filter(team__members=request.user).select_related("team", "cluster")
    return render(
        request,
        "accounts/account.html",
        {"token": token, "new_key": new_key, "grants": grants, "teams": request.user.teams.all()},
    )


@never_cache
@login_required
def account_page(request: HttpRequest) -> HttpResponse:
    """Never shows a token's key: only whether one exists and since when."""
    return _page(request)


@never_cache
@require_POST
@login_required
def create_token(request: HttpRequest) -> HttpResponse:
    """A new key replaces any old one (the old stops working) and is shown in this response only.

    Rendered directly instead of redirecting, so the key never sits in a session or a URL, and
    ``never_cache`` keeps it out of browser and proxy caches.
    """
    Token.objects.filter(user=request.user).delete()
    token = Token.objects.create(user=request.user)
    return _page(request, new_key=token.key)


@require_POST
@login_required
def revoke_token(request: HttpRequest) -> HttpResponse:
    deleted, _ = Token.objects.filter(user=request.user).delete()
    messages.success(request, "API token revoked." if deleted else "You had no API token.")
    return redirect("account")
