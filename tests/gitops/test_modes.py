"""Change modes: staff set them in the API and the admin; the token is write-only and encrypted at
rest like the clusters' credentials; bad settings are refused naming field, value and rule."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from gitops.models import ChangeMode
from gitops.scopes import in_git, mode_for, path_for
from models_app.models import InferenceModel
from tests.clusters.test_credentials_at_rest import encryption_keys

URL = "/api/gitops/modes/"
GOOD = {
    "cluster": "prod", "namespace": "nlp", "mode": "git", "forge": "gitea",
    "repository_url": "https://gitea.example.com/platform/clusters", "token": "forge-s3cr3t",
}  # fmt: skip


@pytest.fixture
def staff(api_as):
    return api_as(staff=True)


def test_staff_set_a_mode_and_the_token_never_comes_back(staff, cluster) -> None:
    created = staff.post(URL, GOOD, format="json")
    assert created.status_code == 201, created.json()
    assert "token" not in created.json() and created.json()["has_token"] is True
    listed = staff.get(URL)
    assert "forge-s3cr3t" not in listed.content.decode()
    mode = ChangeMode.objects.get()
    assert mode.token == "forge-s3cr3t" and mode.path_layout == "clusters/<cluster>/<namespace>/<kind>/<name>.yaml"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {ChangeMode._meta.db_table}")  # what a dump holds
        assert "forge-s3cr3t" not in " ".join(str(value) for value in cursor.fetchone())


def test_people_who_are_not_staff_may_not_read_or_set_modes(api_as, cluster) -> None:
    member = api_as(perms=["gitops.add_changemode", "gitops.view_changemode"])
    assert member.get(URL).status_code == 403
    assert member.post(URL, GOOD, format="json").status_code == 403


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"path_layout": "clusters/<name>.yaml"}, "path_layout", "must contain <namespace>, <kind>"),
        ({"path_layout": "../<namespace>/<kind>/<name>.yaml"}, "path_layout", "relative path"),
        ({"path_layout": "c/<namespace>/<kind>/<name>.json"}, "path_layout", "must end in .yaml"),
        ({"kind_layouts": {"Pod": "p/<namespace>/<name>.yaml"}}, "kind_layouts", "'Pod' is not a mirrored kind"),
        ({"kind_layouts": {"Model": "<name>.yaml"}}, "kind_layouts", "must contain <namespace>"),
        ({"repository_url": "http://gitea.example.com/platform/clusters"}, "repository_url", "must be https://"),
        ({"repository_url": "https://gitea.example.com/only-owner"}, "repository_url", "<owner>/<name>"),
        ({"repository_url": "https://user:pw@gitea.example.com/o/r"}, "repository_url", "must not carry user-info"),
        ({"token": ""}, "token", "is required when mode is git"),
        ({"branch": "main..x"}, "branch", "must be a branch name"),
        ({"namespace": "Not_A_Namespace"}, "namespace", "RFC 1123"),
    ],
)
def test_bad_settings_are_a_400_naming_field_value_and_rule(staff, cluster, change, field, words) -> None:
    answer = staff.post(URL, {**GOOD, **change}, format="json")
    assert answer.status_code == 400, answer.content
    assert words in " ".join(answer.json()[field])
    assert not ChangeMode.objects.exists()


def test_a_moved_repository_needs_its_token_again(staff, cluster) -> None:
    mode_id = staff.post(URL, GOOD, format="json").json()["id"]
    moved = staff.patch(f"{URL}{mode_id}/", {"repository_url": "https://elsewhere.example.com/me/mine"}, format="json")
    assert moved.status_code == 400 and "must be given again" in moved.json()["token"][0]
    again = {"repository_url": "https://elsewhere.example.com/me/mine", "token": "new-s3cr3t"}
    assert staff.patch(f"{URL}{mode_id}/", again, format="json").status_code == 200
    assert ChangeMode.objects.get().token == "new-s3cr3t"


def test_the_admin_never_renders_the_token(make_user, cluster, git_mode) -> None:
    from django.test import Client

    mode = git_mode(cluster)
    admin = Client()
    admin.force_login(make_user("root", staff=True, perms=["gitops.change_changemode", "gitops.view_changemode"]))
    page = admin.get(f"/admin/gitops/changemode/{mode.pk}/change/")
    assert page.status_code == 200 and "forge-s3cr3t" not in page.content.decode()
    kept = admin.post(f"/admin/gitops/changemode/{mode.pk}/change/", {
        "cluster": cluster.pk, "namespace": "", "mode": "git", "forge": "gitea", "repository_url": mode.repository_url,
        "branch": "main", "path_layout": mode.path_layout, "kind_layouts": "{}", "token": "",
        "allow_insecure_http": "on",
    })  # fmt: skip
    assert kept.status_code == 302, kept.content.decode()[-2000:]
    assert ChangeMode.objects.get().token == "forge-s3cr3t"


def test_key_rotation_re_encrypts_the_forge_tokens_too(cluster, git_mode) -> None:
    with encryption_keys("old"):
        cluster.save()
        mode = git_mode(cluster)
    with encryption_keys("new"), pytest.raises(CommandError, match=rf"gitops.ChangeMode#{mode.pk}\.token"):
        call_command("reencrypt_credentials", stdout=io.StringIO())
    with encryption_keys("new", "old"):
        call_command("reencrypt_credentials", stdout=io.StringIO())
    with encryption_keys("new"):
        assert ChangeMode.objects.get().token == "forge-s3cr3t"


def test_a_namespace_mode_wins_over_its_clusters(cluster, git_mode) -> None:
    git_mode(cluster)
    ChangeMode.objects.create(cluster=cluster, namespace="sandbox", mode=ChangeMode.Mode.DIRECT)
    here = InferenceModel(cluster=cluster, namespace="nlp", name="m")
    there = InferenceModel(cluster=cluster, namespace="sandbox", name="m")
    assert in_git(here) is not None and in_git(there) is None
    assert mode_for(cluster.pk, "sandbox").mode == "direct"
    assert path_for(in_git(here), here) == "clusters/prod/nlp/inferencemodel/m.yaml"
