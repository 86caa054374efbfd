"""GitOps mode end to end, with the real things: a Gitea server the portal opens pull requests on,
Flux's source and kustomize controllers applying the repository's ``main`` to the real control
plane, and the portal's sync reading the cluster back (tests/support/gitops.py's fixtures). Tests
about the portal and the forge alone use a repository no engine watches (``gitea_repo``) and write
the cluster as the engine would.

Every wait is on a condition (the pull request's state, Flux's applied revision, the row's state),
never on time; the bounds are generous for a machine at load 20.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from rest_framework.test import APIClient

from accounts.models import NamespaceGrant, Team
from clusters.models import AuditEntry, Cluster, SyncState
from devstack.gitea import Gitea
from gitops.drift import check_drift
from gitops.follow import follow_pull_requests
from gitops.forge import GitHub
from gitops.manifests import blob_sha, git_manifest
from gitops.models import ChangeMode, GitFile, ProposedChange
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest, wait_for
from tests.conftest import ALL_KIND_PERMS, ENDPOINTS
from tests.support.gitops import ORGANISATION, GitOpsRepo

URL = ENDPOINTS["InferenceModel"]
SAMPLE = "inferencemodel-mistral-7b.yaml"
# Flux's interval (5 s) plus its clone and apply, on a machine whose load is 10 times its cores.
FLUX_BOUND_SECONDS = 240.0


@pytest.fixture
def gitea_repo(gitea: Gitea, kube) -> Iterator[GitOpsRepo]:
    """A repository of the test's own that no GitOps engine applies: the cluster is written as an
    engine would (``kube.write``), where a test is about the portal and Gitea alone."""
    gitea.create_repository(ORGANISATION, kube.namespace)
    yield GitOpsRepo(gitea, None, ORGANISATION, kube.namespace)
    gitea.call("DELETE", f"/repos/{ORGANISATION}/{kube.namespace}")


def in_git_mode(kube, repo: GitOpsRepo) -> Cluster:
    """The test's cluster, its namespace in git mode on ``repo``."""
    cluster = kube.register()
    mode = ChangeMode(cluster=cluster, namespace=kube.namespace, mode=ChangeMode.Mode.GIT,
                      forge=ChangeMode.Forge.GITEA, repository_url=repo.web_url,
                      token=repo.gitea.token, allow_insecure_http=True)  # fmt: skip
    mode.full_clean()
    mode.save()
    return cluster


@pytest.fixture
def git_namespace(transactional_db, kube, gitea_repo) -> Cluster:
    return in_git_mode(kube, gitea_repo)


@pytest.fixture
def flux_namespace(transactional_db, kube, gitops_repo) -> Cluster:
    return in_git_mode(kube, gitops_repo)


@pytest.fixture
def ann(make_user) -> APIClient:
    client = APIClient()
    client.force_authenticate(make_user("ann", perms=ALL_KIND_PERMS))
    return client


def file_on(repo, path: str, ref: str) -> dict[str, Any] | None:
    """The manifest at ``path`` on ``ref`` in Gitea, or None."""
    answer = repo.gitea.api.get(f"{repo.gitea.url}/api/v1/repos/{repo.owner}/{repo.name}/contents/{path}",
                                params={"ref": ref}, timeout=30)  # fmt: skip
    return yaml.safe_load(base64.b64decode(answer.json()["content"])) if answer.ok else None


def follow_until(state: str, bound: float = FLUX_BOUND_SECONDS) -> ProposedChange:
    """Run the poller (the Celery task's body) until the one change reaches ``state``."""

    def reached() -> ProposedChange | None:
        follow_pull_requests()
        return ProposedChange.objects.filter(state=state).first()

    return wait_for(reached, timeout=bound, message=f"the pull request to be {state}")


def in_git_first(kube, repo: GitOpsRepo, memory: str = "16Gi") -> InferenceModel:
    """The model, committed to main, in the cluster (applied by Flux, or written as it would) and
    read by the portal: the starting point."""
    manifest = sample_manifest(SAMPLE, kube.namespace)
    manifest["spec"]["memory"] = memory
    in_git = git_manifest(InferenceModel, {"spec": manifest["spec"]}, kube.namespace, manifest["metadata"]["name"])
    commit = repo.commit(in_git, "add the model")
    if repo.flux is not None:
        repo.wait_applied(commit)
    else:
        kube.write(in_git, field_manager="kustomize-controller")
    kube.sync()
    return wait_for(lambda: InferenceModel.objects.filter(sync_state=SyncState.SYNCED).first(), timeout=60,
                    message="the portal's row of the model Flux applied")  # fmt: skip


def edit_memory(client: APIClient, row: InferenceModel, memory: str):
    return client.patch(f"{URL}{row.pk}/", {"spec": {"memory": memory}}, format="json")


def test_an_edit_becomes_a_pull_request_and_more_edits_go_to_the_same_one(
    git_namespace, kube, gitea_repo, ann
) -> None:
    row = in_git_first(kube, gitea_repo)
    path = gitea_repo.manifest_path(kube.namespace, "InferenceModel", row.name)

    writes = kube.writes_during(lambda: edit_memory(ann, row, "20Gi"))
    assert writes == [], "git mode: the portal wrote to the cluster"
    change = ProposedChange.objects.get()
    assert change.number and change.path == path and change.state == ProposedChange.State.OPEN
    on_branch = file_on(gitea_repo, path, change.branch)
    assert on_branch["spec"]["memory"] == "20Gi" and "status" not in on_branch
    assert set(on_branch["metadata"]) <= {"name", "namespace", "labels", "annotations"}
    shown = ann.get(f"{URL}{row.pk}/").json()
    assert shown["sync"]["gitops"]["pending"][0]["pullRequest"] == change.number
    assert "+  memory: 20Gi" in shown["sync"]["gitops"]["pending"][0]["diff"]

    # a second edit of the same person before the merge: the same pull request, one more commit
    version = ann.get(f"{URL}{row.pk}/").json()["metadata"]["resourceVersion"]
    body = {"metadata": {"resourceVersion": version}, "spec": {"memory": "24Gi"}}
    assert kube.writes_during(lambda: ann.patch(f"{URL}{row.pk}/", body, format="json")) == []
    assert ProposedChange.objects.count() == 1
    commits = gitea_repo.gitea.call("GET", f"/repos/{gitea_repo.owner}/{gitea_repo.name}/pulls/"
                                           f"{change.number}/commits")  # fmt: skip
    assert len(commits) == 2 and file_on(gitea_repo, path, change.branch)["spec"]["memory"] == "24Gi"
    assert kube.read(InferenceModel.kube, row.name)["spec"]["memory"] == "16Gi"  # nothing applied


def test_a_merged_pull_request_applied_by_flux_changes_cluster_and_row(flux_namespace, kube, gitops_repo,
                                                                        ann) -> None:
    row = in_git_first(kube, gitops_repo)
    assert kube.writes_during(lambda: edit_memory(ann, row, "24Gi")) == []
    change = ProposedChange.objects.get()
    merge_commit = gitops_repo.merge(change.number)
    applied = follow_until(ProposedChange.State.APPLIED)
    assert applied.merge_commit == merge_commit
    assert kube.read(InferenceModel.kube, row.name)["spec"]["memory"] == "24Gi"
    row.refresh_from_db()
    assert row.sync_state == SyncState.SYNCED and row.spec["memory"] == "24Gi"
    assert AuditEntry.objects.filter(object_id=row.pk, action=AuditEntry.Action.APPLIED,
                                     message__contains=merge_commit[:12]).exists()  # fmt: skip
    assert ann.get(f"{URL}{row.pk}/").json()["sync"]["gitops"]["pending"] == []


def test_a_pull_request_closed_unmerged_leaves_the_cluster_and_drops_the_change(
    git_namespace, kube, gitea_repo, ann
) -> None:
    row = in_git_first(kube, gitea_repo)
    assert kube.writes_during(lambda: edit_memory(ann, row, "20Gi")) == []
    change = ProposedChange.objects.get()
    gitea_repo.gitea.call("PATCH", f"/repos/{gitea_repo.owner}/{gitea_repo.name}/pulls/{change.number}",
                          json={"state": "closed"})  # fmt: skip
    follow_until(ProposedChange.State.CLOSED)
    row.refresh_from_db()
    assert row.sync_state == SyncState.SYNCED and row.spec["memory"] == "16Gi"
    assert kube.read(InferenceModel.kube, row.name)["spec"]["memory"] == "16Gi"


def test_a_kubectl_edit_shows_as_drift_with_the_difference(git_namespace, kube, gitea_repo, ann) -> None:
    row = in_git_first(kube, gitea_repo)
    check_drift()
    assert GitFile.objects.get(object_id=row.pk).drift == []
    edited = kube.read(InferenceModel.kube, row.name)
    edited["spec"]["memory"] = "30Gi"
    metadata = {"name": row.name, "namespace": kube.namespace, "labels": edited["metadata"].get("labels") or {}}
    kube.write({"apiVersion": edited["apiVersion"], "kind": edited["kind"], "metadata": metadata,
                "spec": edited["spec"]})  # fmt: skip
    kube.sync()
    wait_for(lambda: InferenceModel.objects.get(pk=row.pk).spec["memory"] == "30Gi", timeout=60,
             message="the portal to read the kubectl edit")  # fmt: skip
    assert check_drift() == 1
    drift = ann.get(f"{URL}{row.pk}/").json()["sync"]["gitops"]
    assert drift["drifted"] and {"path": "spec.memory", "git": "16Gi", "cluster": "30Gi"} in drift["drift"]


def test_an_edit_whose_file_moved_on_in_git_is_refused(git_namespace, kube, gitea_repo, ann) -> None:
    row = in_git_first(kube, gitea_repo)
    edit_memory(ann, row, "20Gi")
    change = ProposedChange.objects.get()
    manifest = file_on(gitea_repo, change.path, "main")
    manifest["spec"]["memory"] = "18Gi"
    gitea_repo.commit(manifest, "someone else's change on main")
    version = ann.get(f"{URL}{row.pk}/").json()["metadata"]["resourceVersion"]
    ann.patch(f"{URL}{row.pk}/", {"metadata": {"resourceVersion": version}, "spec": {"memory": "22Gi"}},
              format="json")  # fmt: skip
    row.refresh_from_db()
    assert row.sync_state == SyncState.ERROR
    assert f"changed in Git's main since pull request #{change.number} began" in row.last_error
    assert file_on(gitea_repo, change.path, change.branch)["spec"]["memory"] == "20Gi"  # not overwritten


def test_a_member_cannot_open_a_pull_request_for_another_teams_namespace(
    git_namespace, kube, gitea_repo, make_user
) -> None:
    elsewhere = Team.objects.create(name="elsewhere")
    NamespaceGrant.objects.create(team=elsewhere, cluster=git_namespace, namespace="not-" + kube.namespace)
    client = APIClient()
    client.force_authenticate(make_user("bob", perms=ALL_KIND_PERMS, teams=[elsewhere]))
    refused = client.post(URL, sample_manifest(SAMPLE, kube.namespace), format="json")
    assert refused.status_code in (403, 404), refused.content
    pulls = gitea_repo.gitea.call("GET", f"/repos/{gitea_repo.owner}/{gitea_repo.name}/pulls",
                                  params={"state": "all"})  # fmt: skip
    assert pulls == [] and not ProposedChange.objects.exists()


def test_a_new_object_whose_file_git_already_holds_changes_that_file(git_namespace, kube, gitea_repo, ann) -> None:
    # The portal knows of no file for a new object, so its commit creates one without reading Git
    # first; Gitea refuses that create here, and the portal reads the file and starts from it.
    manifest = sample_manifest(SAMPLE, kube.namespace)
    name = manifest["metadata"]["name"]
    gitea_repo.commit(git_manifest(InferenceModel, {"spec": {**manifest["spec"], "memory": "16Gi"}},
                                   kube.namespace, name), "someone committed the model first")  # fmt: skip
    manifest["spec"]["memory"] = "20Gi"
    assert kube.writes_during(lambda: ann.post(URL, manifest, format="json")) == []
    change = ProposedChange.objects.get()
    assert change.number and change.base_blob_sha, InferenceModel.objects.get().last_error
    assert file_on(gitea_repo, change.path, change.branch)["spec"]["memory"] == "20Gi"
    assert "-  memory: 16Gi" in change.diff and "+  memory: 20Gi" in change.diff


def test_a_later_edit_commits_over_what_someone_else_pushed_to_the_branch(git_namespace, kube, gitea_repo,
                                                                          ann) -> None:
    # A later edit's commit starts from what the portal last wrote on the branch, unread; a branch
    # someone else committed to since is refused by Gitea, read, and committed on.
    row = in_git_first(kube, gitea_repo)
    edit_memory(ann, row, "20Gi")
    change = ProposedChange.objects.get()
    theirs = file_on(gitea_repo, change.path, change.branch)
    theirs["spec"]["memory"] = "18Gi"
    gitea_repo.commit(theirs, "a reviewer's suggestion", branch=change.branch)
    version = ann.get(f"{URL}{row.pk}/").json()["metadata"]["resourceVersion"]
    ann.patch(f"{URL}{row.pk}/", {"metadata": {"resourceVersion": version}, "spec": {"memory": "24Gi"}},
              format="json")  # fmt: skip
    assert InferenceModel.objects.get(pk=row.pk).sync_state == SyncState.PENDING_APPLY
    commits = gitea_repo.gitea.call("GET", f"/repos/{gitea_repo.owner}/{gitea_repo.name}/pulls/"
                                           f"{change.number}/commits")  # fmt: skip
    assert len(commits) == 3 and file_on(gitea_repo, change.path, change.branch)["spec"]["memory"] == "24Gi"


class GitHubClientAtGitea(GitHub):
    """The GitHub client, addressed at Gitea's ``/api/v1``: for the calls Gitea serves in GitHub's
    shape (docs/gitops.md lists them, and the ones it does not)."""

    @staticmethod
    def _api_base(base: str) -> str:
        return f"{base}/api/v1"


def test_the_github_clients_calls_in_the_shapes_gitea_shares_with_github(git_namespace, kube, gitea_repo) -> None:
    forge = GitHubClientAtGitea(ChangeMode.objects.get())
    manifest = git_manifest(InferenceModel, {"spec": sample_manifest(SAMPLE, kube.namespace)["spec"]},
                            kube.namespace, "m")  # fmt: skip
    gitea_repo.commit(manifest, "a file on a branch", new_branch="review")
    path = gitea_repo.manifest_path(kube.namespace, "InferenceModel", "m")
    folder = path.rsplit("/", 2)[0]
    found = forge.read_file(path, "review")
    assert forge.files_under(folder, "review") == {path: found.sha} and forge.files_under(folder, "main") == {}
    assert forge.blob_text(found.sha) == found.text
    forge.write_file(path, "review", "changed: true\n", found.sha, "GitHub's update: a PUT with the file's sha")
    assert forge.read_file(path, "review").sha == blob_sha("changed: true\n")
    opened = forge.open_pull_request("review", "main", "from the GitHub client", "body")
    followed = forge.pull_request(opened.number)
    assert followed.state == "open" and not followed.merged and opened.url.endswith(f"/pulls/{opened.number}")
    forge.delete_file(path, "review", blob_sha("changed: true\n"), "GitHub's delete")
    assert forge.read_file(path, "review") is None
