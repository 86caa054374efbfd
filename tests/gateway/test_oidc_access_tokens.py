"""OIDC access tokens at the gateway: JWTs from the tests' real identity provider, verified with
its JWKS (cached, fetched again for a rotated key), its issuer, the portal's audience and the
expiry; the caller is scoped to their teams' namespaces exactly as with an API token."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from accounts.access_tokens import not_an_access_token
from accounts.models import ExternalIdentity, NamespaceGrant, Team
from clusters.models import Cluster
from devstack.oidc_provider import OidcProvider
from governance.gateway import LimitView
from governance.limits import Limiter, LocalCounters
from inference_gateway.callers import Caller, Callers, NotAuthenticated, verify
from tests.gateway.test_callers import closed_reads, run  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db(transaction=True)


def start_provider(tmp_path, settings, ttl: str = "5m") -> OidcProvider:
    idp = OidcProvider(workdir=tmp_path, redirect_uris=[], access_token_ttl=ttl)
    idp.add_user("u-ada", "ada", "ada-password", groups=[])
    idp.add_user("u-eve", "eve", "eve-password", groups=[])
    idp.start()
    for name, value in idp.portal_settings().items():
        setattr(settings, name, value)
    return idp


@pytest.fixture
def provider(tmp_path, settings) -> Iterator[OidcProvider]:
    idp = start_provider(tmp_path, settings)
    yield idp
    idp.stop()


@pytest.fixture
def ada(provider, make_user):
    """ada has signed in through the provider once: linked, in team vision (namespace vision)."""
    cluster = Cluster.objects.create(name="east", auth_method=Cluster.AuthMethod.SNAPSHOT)
    vision = Team.objects.create(name="vision")
    NamespaceGrant.objects.create(team=vision, cluster=cluster, namespace="vision")
    user = make_user("ada", teams=[vision])
    ExternalIdentity.objects.create(user=user, issuer=provider.issuer, subject="u-ada")
    return user, cluster


def test_an_access_token_is_a_caller_scoped_like_an_api_token(provider, ada):
    user, cluster = ada
    token = provider.access_token("ada", "ada-password")
    caller, expires = verify(token)
    assert caller.user_id == user.pk and caller.username == "ada" and expires > time.time()
    assert caller.visible(cluster.pk, "vision") and not caller.visible(cluster.pk, "nlp")
    through_the_gateway = run(lambda: Callers(ttl=10).caller(f"Bearer {token}"))
    assert through_the_gateway.username == "ada"


def test_an_expired_token_is_refused(tmp_path, settings, make_user):
    idp = start_provider(tmp_path, settings, ttl="-1m")  # the provider issues tokens already expired
    try:
        ExternalIdentity.objects.create(user=make_user("ada"), issuer=idp.issuer, subject="u-ada")
        with pytest.raises(NotAuthenticated, match=r"(?i)expired"):
            verify(idp.access_token("ada", "ada-password"))
    finally:
        idp.stop()


def test_a_token_for_another_audience_is_refused(provider, ada, settings):
    token = provider.access_token("ada", "ada-password")
    settings.OIDC_AUDIENCE = "some-other-application"
    with pytest.raises(NotAuthenticated, match=r"(?i)audience"):
        verify(token)


def test_a_rotated_key_is_fetched_and_the_old_keys_tokens_refused(provider, ada, settings):
    settings.OIDC_JWKS_REFRESH_COOLDOWN_SECONDS = 0  # (default 30 s between fetches for unknown key ids)
    before = provider.access_token("ada", "ada-password")
    assert verify(before)[0].username == "ada"  # the provider's keys are now cached
    provider.start()  # restarted: new signing keys, same address
    after = provider.access_token("ada", "ada-password")
    assert verify(after)[0].username == "ada"  # an unknown key id fetches the keys again
    with pytest.raises(NotAuthenticated, match="signing key"):
        verify(before)


def test_a_provider_user_who_never_signed_in_to_the_portal_is_refused(provider, ada):
    with pytest.raises(NotAuthenticated, match="has not signed in"):
        verify(provider.access_token("eve", "eve-password"))


def test_a_forged_token_is_refused(provider, ada):
    header, payload, _ = provider.access_token("ada", "ada-password").split(".")
    with pytest.raises(NotAuthenticated):
        verify(f"{header}.{payload}.c2lnbmF0dXJl")


def test_each_single_sign_on_person_has_their_own_per_caller_count(provider, ada, make_user):
    """Issue 40 item 5: every access-token caller once had the empty key, one counter for all of
    them: one team's person spent another's. Now the key is the person (all their tokens)."""
    eve = make_user("eve")
    ExternalIdentity.objects.create(user=eve, issuer=provider.issuer, subject="u-eve")
    ada_first, ada_second = (verify(provider.access_token("ada", "ada-password"))[0] for _ in range(2))
    eve_caller = verify(provider.access_token("eve", "eve-password"))[0]
    assert ada_first.token_key == ada_second.token_key == f"person:{ada[0].pk}" != eve_caller.token_key
    rule = [LimitView("7:*", None, None, None, 1, None)]  # api_token_requests_per_minute=1

    async def calls() -> list[bool]:
        limiter = Limiter(LocalCounters(), lambda: 1_900_000_000.0)
        callers = (ada_first, ada_second, eve_caller)
        return [(await limiter.admit(rule, caller.token_key, "team")).refused is None for caller in callers]

    assert asyncio.run(calls()) == [True, False, True]  # ada's second token is ada; eve is not


def test_a_caller_never_has_an_empty_counter_key():
    with pytest.raises(ValueError, match="token_key"):
        Caller(1, "ada", lambda cluster, namespace: True, "", "")


@pytest.mark.parametrize("nonce", [None, "n-0S6_WzA2Mj"], ids=["without-nonce", "with-nonce"])
def test_an_id_token_is_no_gateway_credential(provider, ada, nonce):
    """Issue 40 item 6: the provider's ID token (same keys, same person, the client as audience,
    an hour's life) was accepted like its 5-minute access token."""
    tokens = provider.tokens("ada", "ada-password", nonce=nonce)
    assert verify(tokens["access_token"])[0].username == "ada"
    with pytest.raises(NotAuthenticated, match="not an access token"):
        verify(tokens["id_token"])
    with pytest.raises(NotAuthenticated, match="not an access token"):
        run(lambda: Callers(ttl=10).caller(f"Bearer {tokens['id_token']}"))


@pytest.mark.parametrize(
    ("header", "claims", "access"),
    [
        ({"typ": "at+jwt"}, {"nonce": "n"}, True),  # RFC 9068 marks it: decided by the mark
        ({"typ": "JWT"}, {"token_use": "access"}, True),  # AWS Cognito
        ({"typ": "JWT"}, {"token_use": "id"}, False),
        ({"typ": "JWT"}, {"typ": "Bearer", "nonce": "n"}, True),  # Keycloak (older ones put nonce in both)
        ({"typ": "JWT"}, {"typ": "ID"}, False),
        ({"typ": "JWT"}, {"jti": "1", "client_id": "portal"}, True),  # zitadel/oidc's access token
        ({"typ": "JWT"}, {"at_hash": "x", "client_id": "portal"}, False),  # ... and its ID token
        ({}, {"c_hash": "x"}, False),
    ],
)
def test_how_providers_mark_their_tokens(header, claims, access):
    assert (not_an_access_token(header, claims) is None) is access
