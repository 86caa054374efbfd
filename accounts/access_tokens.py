"""OIDC access tokens as API credentials: a JWT from the identity provider names a portal user.

The signature is checked with the provider's keys (``OIDC_JWKS_ENDPOINT``, fetched by PyJWT's
PyJWKClient: cached for ``OIDC_JWKS_CACHE_SECONDS`` and fetched again at once when a token names a
key it has not seen, so a rotated key is picked up without a restart; such a fetch at most once per
``OIDC_JWKS_REFRESH_COOLDOWN_SECONDS``, so made-up key ids cannot make the gateway hammer the
provider), then the issuer
(``OIDC_ISSUER``), the audience (``OIDC_AUDIENCE``, default the portal's client id) and the expiry.
The subject must be a person who has signed in to the portal through single sign-on
(``ExternalIdentity``) and is active: their teams, synced at that login, scope what they reach,
exactly as for their API tokens.

Only **access tokens** are credentials. An ID token is signed by the same keys, names the same
person and carries the client id as its audience, yet it says who signed in to the portal, not
what may be called, and it lives far longer (an hour where access tokens live minutes). It is told
apart as providers mark it (:func:`not_an_access_token`): RFC 9068's header ``typ: at+jwt`` marks
an access token; AWS Cognito's ``token_use`` and Keycloak's ``typ`` claim name the kind; where no
marker is given (zitadel/oidc, the tests' provider, writes ``typ: JWT`` on both), a token with a
claim only ID tokens carry (``nonce``, ``at_hash``, ``c_hash``, ``s_hash``: OpenID Connect Core
3.1.3.6, 3.3.2.11) is one.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jwt
from django.conf import settings

from accounts.models import ExternalIdentity


class InvalidAccessToken(Exception):
    """The JWT is not one the portal accepts; the message says why."""


ACCESS_TOKEN_TYPES = {"at+jwt", "application/at+jwt"}  # RFC 9068's header typ
ID_TOKEN_ONLY_CLAIMS = ("nonce", "at_hash", "c_hash", "s_hash")


def not_an_access_token(header: dict[str, Any], claims: dict[str, Any]) -> str | None:
    """Why a verified JWT is not an access token (None: it is one), by the provider's own marks."""
    if str(header.get("typ", "")).lower() in ACCESS_TOKEN_TYPES:
        return None
    if "token_use" in claims:  # AWS Cognito: "access" or "id"
        return None if claims["token_use"] == "access" else f"token_use is {claims['token_use']!r}, not 'access'"
    if isinstance(claims.get("typ"), str):  # Keycloak: "Bearer" (access), "ID", "Refresh", ...
        return None if claims["typ"].lower() == "bearer" else f"its typ claim is {claims['typ']!r}, not 'Bearer'"
    present = [claim for claim in ID_TOKEN_ONLY_CLAIMS if claim in claims]
    return f"it carries {', '.join(present)}, claims of ID tokens only" if present else None


def looks_like_jwt(key: str) -> bool:
    return key.count(".") == 2 and key.startswith("ey")


@lru_cache(maxsize=4)
def _keys(jwks_uri: str, lifespan: int, cooldown: int) -> jwt.PyJWKClient:
    return jwt.PyJWKClient(jwks_uri, cache_jwk_set=True, lifespan=lifespan, timeout=10, cooldown_duration=cooldown)


def verify_access_token(token: str) -> tuple[Any, float]:
    """The active user the token names and its expiry (Unix time); raises InvalidAccessToken."""
    if not (settings.OIDC_OP_JWKS_ENDPOINT and settings.OIDC_ISSUER):
        raise InvalidAccessToken("single sign-on is not configured: use a portal API token")
    try:
        keys = _keys(
            settings.OIDC_OP_JWKS_ENDPOINT,
            settings.OIDC_JWKS_CACHE_SECONDS,
            settings.OIDC_JWKS_REFRESH_COOLDOWN_SECONDS,
        )
        key = keys.get_signing_key_from_jwt(token)
        claims = jwt.decode(
            token,
            key.key,
            algorithms=[settings.OIDC_RP_SIGN_ALGO],
            audience=settings.OIDC_AUDIENCE or settings.OIDC_RP_CLIENT_ID,
            issuer=settings.OIDC_ISSUER,
            options={"require": ["exp", "sub", "iss", "aud"]},
        )
    except jwt.PyJWKClientError as error:
        raise InvalidAccessToken(f"the token's signing key is unknown to the provider: {error}") from None
    except jwt.InvalidTokenError as error:
        raise InvalidAccessToken(f"invalid access token: {error}") from None
    reason = not_an_access_token(jwt.get_unverified_header(token), claims)  # the signature was checked above
    if reason is not None:
        raise InvalidAccessToken(f"not an access token ({reason}): send the provider's access token, not its ID token")
    identity = (
        ExternalIdentity.objects.select_related("user")
        .filter(issuer=settings.OIDC_ISSUER, subject=claims["sub"], user__is_active=True)
        .first()
    )
    if identity is None:
        raise InvalidAccessToken("the token's user has not signed in to the portal yet (or is deactivated)")
    return identity.user, float(claims["exp"])
