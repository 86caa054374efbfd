"""In git mode every write path ends at the route instead of the cluster (the apply of a row,
``clusters.sync.outbound``), and a person's change is proposed only where their team may edit.

No forge answers here (the git mode's repository is a closed loopback port): what these tests show
is where each write goes, by the address its transient failure names. The tests with a real Gitea
(tests/gitops/test_gitea_*.py) follow the change through."""

from __future__ import annotations

import copy

import pytest
import yaml

from accounts.models import NamespaceGrant, Team
from clusters.models import AuditEntry, SyncState
from clusters.sync.outbound import Outcome, apply_object
from gitops.models import ProposedChange
from models_app.models import InferenceModel
from tests.conftest import ALL_KIND_PERMS, ENDPOINTS, load_samples

SAMPLE = dict(load_samples())["inferencemodel-llama-2-70b.yaml"]


def in_namespace(namespace: str) -> dict:
    manifest = copy.deepcopy(SAMPLE)
    manifest["metadata"]["namespace"] = namespace
    return manifest


def test_an_api_edit_in_git_mode_goes_to_the_forge_not_the_cluster(
    editor, cluster, git_mode, django_capture_on_commit_callbacks, caplog
) -> None:
    mode = git_mode(cluster, namespace="nlp")
    with django_capture_on_commit_callbacks(execute=True):
        created = editor.post(ENDPOINTS["InferenceModel"], in_namespace("nlp"), format="json")
    assert created.status_code == 201, created.json()
    row = InferenceModel.objects.get()
    assert row.sync_state == SyncState.PENDING_APPLY
    forge_address = mode.repository_url.rsplit("/platform/", 1)[0]
    assert row.last_error.startswith("will retry: POST ") and forge_address in row.last_error, row.last_error
    assert "forge-s3cr3t" not in row.last_error + caplog.text
    assert "/apis/" not in caplog.text  # no request to the cluster's API was even tried
    gitops = editor.get(f"{ENDPOINTS['InferenceModel']}{row.pk}/").json()["sync"]["gitops"]
    assert gitops["path"] == f"clusters/prod/nlp/inferencemodel/{row.name}.yaml" and gitops["pending"] == []


def test_the_same_edit_in_direct_mode_goes_to_the_cluster(
    editor, cluster, git_mode, django_capture_on_commit_callbacks
) -> None:
    git_mode(cluster, namespace="nlp")  # another namespace: this one stays direct
    with django_capture_on_commit_callbacks(execute=True):
        editor.post(ENDPOINTS["InferenceModel"], in_namespace("sandbox"), format="json")
    row = InferenceModel.objects.get()
    assert row.last_error.startswith("will retry: connection failed"), row.last_error  # the cluster's client
    assert editor.get(f"{ENDPOINTS['InferenceModel']}{row.pk}/").json()["sync"]["gitops"] is None


def test_apply_yaml_and_deletes_are_diverted_too(editor, cluster, git_mode, django_capture_on_commit_callbacks) -> None:
    mode = git_mode(cluster)
    forge_address = mode.repository_url.rsplit("/platform/", 1)[0]
    with django_capture_on_commit_callbacks(execute=True):
        answer = editor.post("/api/apply/", data=yaml.safe_dump(in_namespace("nlp")), content_type="application/yaml")
    assert answer.status_code == 200, answer.content
    row = InferenceModel.objects.get()
    assert forge_address in row.last_error
    InferenceModel.objects.filter(pk=row.pk).update(uid="uid-1", sync_state=SyncState.SYNCED, last_error="")
    with django_capture_on_commit_callbacks(execute=True):
        assert editor.delete(f"{ENDPOINTS['InferenceModel']}{row.pk}/").status_code == 202
    row.refresh_from_db()
    assert row.sync_state == SyncState.DELETING and forge_address in row.last_error


def test_no_pull_request_for_a_namespace_the_persons_team_may_not_edit(
    make_user, cluster, git_mode, django_capture_on_commit_callbacks
) -> None:
    from rest_framework.test import APIClient

    git_mode(cluster)
    nlp = Team.objects.create(name="nlp")
    NamespaceGrant.objects.create(team=nlp, cluster=cluster, namespace="nlp")
    member = make_user("ann", perms=ALL_KIND_PERMS, teams=[nlp])
    client = APIClient()
    client.force_authenticate(member)
    with django_capture_on_commit_callbacks(execute=True):
        refused = client.post(ENDPOINTS["InferenceModel"], in_namespace("vision"), format="json")
    assert refused.status_code in (403, 404), refused.content
    assert not InferenceModel.objects.exists() and not ProposedChange.objects.exists()

    # A row whose newest edit is hers in another team's namespace (say, her grant was withdrawn
    # since) is not proposed for her either: the route asks again, with the row's own namespace.
    row = InferenceModel.objects.create(cluster=cluster, namespace="vision", name="m", spec=SAMPLE["spec"])
    AuditEntry.objects.create(kind="InferenceModel", object_id=row.pk, cluster=cluster, namespace="vision", name="m",
                              action="updated", source="api", actor=member, actor_label="ann")  # fmt: skip
    assert apply_object(InferenceModel, row.pk) == Outcome.ERROR
    row.refresh_from_db()
    assert row.sync_state == SyncState.ERROR
    assert "ann may not change objects in namespace vision" in row.last_error
    assert not ProposedChange.objects.exists()


@pytest.mark.parametrize("state", [SyncState.SYNCED, SyncState.CONFLICT])
def test_rows_with_nothing_to_carry_are_left_alone(cluster, git_mode, state) -> None:
    git_mode(cluster)
    row = InferenceModel.objects.create(cluster=cluster, namespace="nlp", name="m", spec=SAMPLE["spec"],
                                        sync_state=state)  # fmt: skip
    assert apply_object(InferenceModel, row.pk) == Outcome.NOTHING_TO_DO
