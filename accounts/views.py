"""The account page: the user's teams and grants, and their API tokens (created, shown once, revoked)."""

from __future__ import annotations

from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView

from accounts.forms import NewTokenForm
from accounts.models import ApiToken, NamespaceGrant
from accounts.oidc import FAILURE
from accounts.tokens import TokenLimitReached, active_tokens, issue_token

NEW_KEY = "accounts.new_token_sealed"  # the session key holding a just-created token, sealed, until shown
SEAL_COOKIE = "portal_token_seal"  # the browser's half: the key that unseals it


def _seal(request: HttpRequest, response: HttpResponse, key: str) -> None:
    """Keeps ``key`` for the redirected page without writing it anywhere in clear.

    The session (a database row) gets the key encrypted with a one-time Fernet key that only the
    browser holds (a cookie for the account page, gone within minutes): a dump of the database,
    sessions included, holds nothing that works against the API.
    """
    seal = Fernet.generate_key()
    request.session[NEW_KEY] = Fernet(seal).encrypt(key.encode()).decode()
    response.set_cookie(
        SEAL_COOKIE,
        seal.decode(),
        max_age=300,
        path="/account/",
        httponly=True,
        secure=request.is_secure(),
        samesite="Strict",
    )


def _unseal(request: HttpRequest) -> str | None:
    """The sealed key, taken out of the session; None when absent or the browser lacks the seal."""
    sealed, seal = request.session.pop(NEW_KEY, None), request.COOKIES.get(SEAL_COOKIE)
    if not sealed or not seal:
        return None
    try:
        return Fernet(seal.encode()).decrypt(sealed.encode()).decode()
    except (InvalidToken, ValueError):
        return None


def _page(
    request: HttpRequest, form: NewTokenForm | None = None, new_key: str | None = None, status: int = 200
) -> HttpResponse:
    grants = NamespaceGrant.objects.filter(team__members=request.user).select_related("team", "cluster")
    context = {
        "tokens": active_tokens(request.user),
        "form": form or NewTokenForm(),
        "new_key": new_key,
        "grants": grants,
        "teams": request.user.teams.all(),
    }
    return render(request, "accounts/account.html", context, status=status)


@never_cache
@login_required
def account_page(request: HttpRequest) -> HttpResponse:
    """Lists tokens by name, creation and expiry; a new key once, right after it was created
    (taken out of the session as it is shown); never again (only its digest is stored)."""
    response = _page(request, new_key=_unseal(request))
    response.delete_cookie(SEAL_COOKIE, path="/account/")
    return response


@never_cache
@require_POST
@login_required
def create_token(request: HttpRequest) -> HttpResponse:
    """A new named token, then post/redirect/get to the account page, which shows its key once.

    Rendering the key in the POST's answer made a reload post the form again, issuing another
    token and losing the key just copied. The key waits in the session, sealed (:func:`_seal`),
    never in a URL, only until the redirected page takes it; ``never_cache`` keeps that page out of
    caches.
    """
    form = NewTokenForm(request.POST)
    if not form.is_valid():
        return _page(request, form=form, status=400)
    try:
        _, key = issue_token(request.user, form.cleaned_data["name"], form.cleaned_data["days"])
    except TokenLimitReached as refused:
        form.add_error(None, str(refused))
        return _page(request, form=form, status=400)
    response = redirect("account")
    _seal(request, response, key)
    return response


@require_POST
@login_required
def revoke_token(request: HttpRequest, digest: str) -> HttpResponse:
    """Ends one of the user's own tokens at once (another person's digest matches nothing)."""
    deleted, _ = ApiToken.objects.filter(user=request.user, digest=digest).delete()
    messages.success(request, "API token revoked." if deleted else "No such token of yours.")
    return redirect("account")


class PortalLoginView(LoginView):
    """The login page: "Sign in with <provider>" when single sign-on is configured, and the
    password form for local accounts unless ``LOCAL_ACCOUNTS`` is off."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(
            sso_enabled=bool(settings.OIDC_RP_CLIENT_ID),
            sso_provider=settings.OIDC_PROVIDER_NAME,
            sso_failed=self.request.GET.get("sso") == "failed",
            sso_failure=getattr(self.request, FAILURE, ""),
            local_accounts=settings.LOCAL_ACCOUNTS,
        )
        return context


class PortalOIDCCallbackView(OIDCAuthenticationCallbackView):
    """The provider's redirect back (``OIDC_CALLBACK_CLASS``): a sign-in that does not complete
    answers the login page with why, as 400 (403 for a refused person), never a server error nor
    a bare redirect: a reused or expired code, a state this browser did not start (or already
    finished), the provider's own error, a provider that cannot be reached."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if "code" in request.GET and "oidc_states" not in request.session:
            setattr(request, FAILURE, "this sign-in was not started in this browser, or has already completed")
        try:
            return super().get(request)
        except SuspiciousOperation:  # the state is not one this browser is waiting for
            setattr(request, FAILURE, "this sign-in was not started in this browser, or has already completed")
            return self.login_failure()

    def login_failure(self) -> HttpResponse:
        request = self.request
        error = request.GET.get("error")
        if error:
            reason = f"the provider answered {error[:100]}: {request.GET.get('error_description', '')[:200]}"
        elif getattr(self, "user", None) is not None and not self.user.is_active:
            reason, request.sso_failure_status = "your portal account is deactivated", 403
        else:
            reason = getattr(request, FAILURE, "") or "the provider's answer named no one the portal can sign in"
        setattr(request, FAILURE, reason)
        response = PortalLoginView.as_view()(request)
        response.status_code = getattr(request, f"{FAILURE}_status", 400)
        return response
