"""Per-caller limits (``api_token_*``) through the real gateway for people calling with the identity
provider's access tokens (tools/oidc-provider): each person has their own count, whichever of their
tokens they send (issue 40 item 5: every such caller once shared one counter, the empty key)."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from accounts.models import ExternalIdentity, NamespaceGrant, Team
from devstack.oidc_provider import OidcProvider
from governance.models import Limit
from tests.gateway.conftest import serve_model
from tests.gateway.test_oidc_access_tokens import start_provider
from tests.governance.test_limits import away_from_minute_end, chat


@pytest.fixture
def provider(tmp_path, settings) -> Iterator[OidcProvider]:
    """The provider with ada and eve, the portal configured for it."""
    idp = start_provider(tmp_path, settings)
    yield idp
    idp.stop()


@pytest.mark.django_db(transaction=True)
def test_each_person_of_single_sign_on_has_their_own_per_caller_count(provider, cluster, gateway, start_backend,
                                                                      make_user) -> None:
    backend = start_backend("replica-a")
    serve_model(cluster, "limited", backend.url)
    team = Team.objects.create(name="team-a")
    NamespaceGrant.objects.create(team=team, cluster=None, namespace="team-a", access=NamespaceGrant.Access.VIEW)
    for subject, name in (("u-ada", "ada"), ("u-eve", "eve")):
        ExternalIdentity.objects.create(user=make_user(name, teams=[team]), issuer=provider.issuer, subject=subject)
    Limit.objects.create(team=team, api_token_requests_per_minute=1)
    ada_tokens = [provider.access_token("ada", "ada-password") for _ in range(2)]
    eve_token = provider.access_token("eve", "eve-password")
    away_from_minute_end()
    assert chat(gateway.client(ada_tokens[0]), "limited").choices
    with pytest.raises(openai.RateLimitError):  # ada's other token is ada
        chat(gateway.client(ada_tokens[1]), "limited")
    assert chat(gateway.client(eve_token), "limited").choices  # eve of the same team has her own count
