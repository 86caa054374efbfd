"""What the model page and the API show of a change on its way through Git, and of drift."""

from __future__ import annotations

from django.test import Client

from clusters.models import SyncState
from gitops.models import GitFile, ProposedChange
from models_app.models import InferenceModel
from tests.conftest import ENDPOINTS, load_samples

SAMPLE = dict(load_samples())["inferencemodel-llama-2-70b.yaml"]
DIFF = "--- a/x.yaml\n+++ b/x.yaml\n@@ -1 +1 @@\n-memory: 16Gi\n+memory: <24Gi>\n"


def test_a_pending_pull_request_and_drift_show_on_the_page_and_in_the_api(make_user, editor, cluster, git_mode) -> None:
    git_mode(cluster)
    row = InferenceModel.objects.create(cluster=cluster, namespace="nlp", name="m", spec=SAMPLE["spec"],
                                        sync_state=SyncState.PENDING_APPLY)  # fmt: skip
    ProposedChange.objects.create(
        cluster=cluster, kind="InferenceModel", object_id=row.pk, namespace="nlp", name="m", author_label="ann",
        path="clusters/prod/nlp/inferencemodel/m.yaml", branch="portal/ann/nlp-inferencemodel-m-1",
        base_branch="main", number=7, url="https://gitea.example.com/platform/clusters/pulls/7", diff=DIFF,
    )  # fmt: skip
    GitFile.objects.create(cluster=cluster, kind="InferenceModel", object_id=row.pk, path="x.yaml", blob_sha="ab",
                           drift=[{"path": "spec.memory", "git": "16Gi", "cluster": "20Gi"}])  # fmt: skip
    browser = Client()
    browser.force_login(make_user("ann"))
    page = browser.get(f"/models/inferencemodels/{row.pk}/").content.decode()
    assert 'href="https://gitea.example.com/platform/clusters/pulls/7"' in page and "pull request #7" in page
    assert "+memory: &lt;24Gi&gt;" in page  # the diff, escaped
    assert "Drifted:" in page and "spec.memory" in page
    assert "forge-s3cr3t" not in page
    gitops = editor.get(f"{ENDPOINTS['InferenceModel']}{row.pk}/").json()["sync"]["gitops"]
    assert gitops["pending"] == [{
        "pullRequest": 7, "url": "https://gitea.example.com/platform/clusters/pulls/7", "state": "open",
        "author": "ann", "branch": "portal/ann/nlp-inferencemodel-m-1", "mergeCommit": "", "diff": DIFF,
    }]  # fmt: skip
    assert gitops["drifted"] is True and gitops["drift"][0]["cluster"] == "20Gi"
    assert "forge-s3cr3t" not in str(gitops)


def test_direct_mode_pages_show_nothing_of_git(make_user, cluster) -> None:
    row = InferenceModel.objects.create(cluster=cluster, namespace="nlp", name="m", spec=SAMPLE["spec"])
    browser = Client()
    browser.force_login(make_user("ann"))
    page = browser.get(f"/models/inferencemodels/{row.pk}/").content.decode()
    assert page.count('id="sync"') == 1 and 'id="gitops"' not in page


def test_an_api_page_in_git_mode_costs_the_same_queries_at_any_size(editor, cluster, git_mode) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    git_mode(cluster)

    def queries_for(count: int) -> int:
        for index in range(count):
            row = InferenceModel.objects.create(cluster=cluster, namespace="nlp", name=f"m{count}-{index}",
                                                spec=SAMPLE["spec"])  # fmt: skip
            ProposedChange.objects.create(cluster=cluster, kind="InferenceModel", object_id=row.pk, namespace="nlp",
                                          name=row.name, author_label="ann", path="p", branch="b", base_branch="main",
                                          number=index + 1)  # fmt: skip
        editor.get(ENDPOINTS["InferenceModel"])  # the person's grants, read once per session
        with CaptureQueriesContext(connection) as queries:
            page = editor.get(ENDPOINTS["InferenceModel"]).json()
        assert all(item["sync"]["gitops"]["pending"] for item in page["results"]), page
        InferenceModel.objects.all().delete()
        return len(queries)

    assert queries_for(1) == queries_for(3)
