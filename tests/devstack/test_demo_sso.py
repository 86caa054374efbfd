"""``make run``'s single sign-on (issue 43: it could not be tried without reading the provider's Go
source and the tests): the demo starts the project's own OpenID provider when it is built, with
demo people whose groups map to demo teams; when it is not built, it says how and goes on."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Group, Permission, User

from accounts.models import GroupMapping, NamespaceGrant, Team
from clusters.models import Cluster
from devstack.live_demo import SSO_PEOPLE, SSO_ROLE, SSO_TEAMS, sso_lines, sso_teams, start_sso
from devstack.oidc_provider import ProviderUnavailable, build_binary
from tests.accounts.test_sso import sso_login

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def local() -> Cluster:
    return Cluster.objects.create(name="local", auth_method=Cluster.AuthMethod.SNAPSHOT)


@pytest.fixture
def provider_built() -> None:
    try:
        build_binary()
    except ProviderUnavailable as reason:
        pytest.skip(str(reason))


def test_demo_people_sign_in_as_members_of_their_demo_teams(provider_built, live_server, settings, tmp_path: Path,
                                                            local: Cluster) -> None:
    role, _ = Group.objects.get_or_create(name=SSO_ROLE)  # accounts' ready-made role
    role.permissions.add(Permission.objects.get(codename="change_inferencemodel"))
    said: list[str] = []
    provider = start_sso(local, f"{live_server.url}/", tmp_path, said.append)
    try:
        assert provider is not None and said == []
        for name, value in provider.portal_settings().items():  # what make run passes the portal's process
            setattr(settings, name, value)
        lines = "\n".join(sso_lines(provider))
        for _, username, password, _ in SSO_PEOPLE:
            assert f"{username} / {password}" in lines
        sso_login(live_server, "ada", "ada-demo-password")
        sso_login(live_server, "grace", "grace-demo-password")
    finally:
        provider.stop()
    ada, grace = User.objects.get(username="ada"), User.objects.get(username="grace")
    assert list(ada.teams.values_list("name", flat=True)) == ["ml-research"]
    assert list(grace.teams.values_list("name", flat=True)) == ["batch-inference"]
    assert ada.has_perm("models_app.change_inferencemodel")
    for team, (_, namespace) in SSO_TEAMS.items():  # each team edits one namespace of local, none of the other's
        grants = NamespaceGrant.objects.filter(team__name=team)
        assert [(grant.cluster, grant.namespace, grant.access) for grant in grants] == [(local, namespace, "edit")]


def test_a_restart_keeps_the_demo_teams_as_they_are(local: Cluster) -> None:
    sso_teams(local)
    Team.objects.get(name="ml-research").members.add(User.objects.create_user("someone"))
    sso_teams(local)
    assert Team.objects.filter(name__in=SSO_TEAMS).count() == GroupMapping.objects.count() == len(SSO_TEAMS)
    assert NamespaceGrant.objects.count() == len(SSO_TEAMS)
    assert Team.objects.get(name="ml-research").members.count() == 1


def test_without_the_provider_built_the_demo_says_how_and_goes_on(monkeypatch, tmp_path: Path,
                                                                 local: Cluster) -> None:
    monkeypatch.setenv("OIDC_PROVIDER_CACHE", str(tmp_path / "nothing-built-here"))
    said: list[str] = []
    assert start_sso(local, "http://127.0.0.1:8000/", tmp_path, said.append) is None
    assert said == ["Single sign-on: off (the OpenID provider is not built: `bash tools/oidc-provider/build.sh` "
                    "(about 40 s once, with Go) or `make test-deps` builds it); the next `make run` starts it "
                    "(docs/identity.md)."]
    assert not Team.objects.exists() and sso_lines(None) == []
