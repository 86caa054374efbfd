"""No portal edit silently reverts a change it never saw, none is lost to a concurrent one, and none
cancels a delete: every write path (API PUT/PATCH, ``/api/apply/``, form and YAML pages, admin)
against the real control plane."""

from __future__ import annotations

import html
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from django.contrib.auth.models import User
from django.db import connections
from django.urls import reverse
from urllib3.util.retry import Retry

from accounts.tokens import issue_token
from clusters.kube.client import ClusterGateway
from clusters.models import AuditEntry, SyncState
from clusters.sync.inbound import mark_deleted_in_cluster, upsert_from_cluster
from clusters.sync.outbound import apply_object
from clusters.sync.resync import ResyncReport, resync_cluster, resync_namespace
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest
from tests.clusters.test_sync import KIND, URL, create_through_api, row
from tests.conftest import ALL_KIND_PERMS
from tests.support.html_forms import form_fields

PAGE = "/models/inferencemodels/{pk}/{mode}/"


def changed_in_the_cluster(kube, live_cluster, **spec: str) -> None:
    """Another writer changes the object; a resync mirrors it (the row's version changes)."""
    current = kube.read(KIND, "mistral-7b")
    current["spec"].update(spec)
    kube.write(current)
    resync_cluster(live_cluster)


class TestOlderCopies:
    def test_put_of_an_older_copy_is_409_naming_versions_and_fields(self, live_cluster, kube, editor) -> None:
        obj = create_through_api(editor, kube)
        copy = editor.get(f"{URL}{obj.pk}/").json()
        changed_in_the_cluster(kube, live_cluster, cooldownPeriod="2h")
        copy["spec"]["memory"] = "12Gi"
        response = editor.put(f"{URL}{obj.pk}/", copy, format="json")
        assert response.status_code == 409, response.json()
        body = response.json()
        given = copy["metadata"]["resourceVersion"]
        assert body["resourceVersion"] == {"current": row().edit_version(), "given": given}
        assert {"path": "spec.cooldownPeriod", "current": "2h", "yours": "10m"} in body["fields"]
        assert {"path": "spec.memory", "current": "8Gi", "yours": "12Gi"} in body["fields"]
        assert "changed since you opened it" in body["detail"]
        in_cluster = kube.read(KIND, "mistral-7b")["spec"]
        assert (in_cluster["cooldownPeriod"], in_cluster["memory"]) == ("2h", "8Gi")

        current = editor.get(f"{URL}{obj.pk}/").json()
        current["spec"]["memory"] = "12Gi"
        assert editor.put(f"{URL}{obj.pk}/", current, format="json").status_code == 200
        in_cluster = kube.read(KIND, "mistral-7b")["spec"]
        assert (in_cluster["cooldownPeriod"], in_cluster["memory"]) == ("2h", "12Gi")

    def test_put_needs_a_version(self, live_cluster, kube, editor) -> None:
        obj = create_through_api(editor, kube)
        copy = editor.get(f"{URL}{obj.pk}/").json()
        del copy["metadata"]["resourceVersion"]
        response = editor.put(f"{URL}{obj.pk}/", copy, format="json")
        assert response.status_code == 400
        assert "metadata.resourceVersion" in response.json()

    def test_patch_names_its_copy_or_applies_to_the_current_object(self, live_cluster, kube, editor) -> None:
        obj = create_through_api(editor, kube)
        version = editor.get(f"{URL}{obj.pk}/").json()["metadata"]["resourceVersion"]
        changed_in_the_cluster(kube, live_cluster, cooldownPeriod="2h")
        stale = {"metadata": {"resourceVersion": version}, "spec": {"memory": "12Gi"}}
        assert editor.patch(f"{URL}{obj.pk}/", stale, format="json").status_code == 409
        patched = editor.patch(f"{URL}{obj.pk}/", {"spec": {"memory": "12Gi"}}, format="json")
        assert patched.status_code == 200
        assert patched.json()["metadata"]["resourceVersion"] == row().edit_version()
        in_cluster = kube.read(KIND, "mistral-7b")["spec"]
        assert (in_cluster["cooldownPeriod"], in_cluster["memory"]) == ("2h", "12Gi")

    def test_apply_of_an_older_copy_is_409_and_writes_nothing(self, live_cluster, kube, editor) -> None:
        obj = create_through_api(editor, kube)
        copy = editor.get(f"{URL}{obj.pk}/").json()
        changed_in_the_cluster(kube, live_cluster, cooldownPeriod="2h")
        copy = {key: copy[key] for key in ("apiVersion", "kind", "metadata", "spec")}
        copy["spec"]["memory"] = "12Gi"
        other = {**copy, "metadata": {"name": "other", "namespace": kube.namespace},
                 "spec": {**copy["spec"], "modelName": "another-model"}}  # a gateway id of its own
        response = editor.post("/api/apply/", [other, copy], format="json")
        assert response.status_code == 409, response.json()
        (refused,) = response.json()["documents"]
        assert (refused["index"], refused["name"]) == (1, "mistral-7b")
        assert {"path": "spec.cooldownPeriod", "current": "2h", "yours": "10m"} in refused["fields"]
        assert not InferenceModel.objects.filter(name="other").exists()
        assert kube.read(KIND, "mistral-7b")["spec"]["cooldownPeriod"] == "2h"

    @pytest.mark.parametrize("mode", ["edit", "yaml"])
    def test_pages_show_the_differences_and_save_only_when_asked_again(
        self, live_cluster, kube, editor, client, make_user, mode
    ) -> None:
        obj = create_through_api(editor, kube)
        client.force_login(make_user("page-editor", perms=ALL_KIND_PERMS))
        url = PAGE.format(pk=obj.pk, mode=mode)
        form = form_fields(client.get(url).content.decode())
        if mode == "edit":
            form["memory"] = "12Gi"
        else:
            form["manifest"] = form["manifest"].replace("memory: 8Gi", "memory: 12Gi", 1)
        changed_in_the_cluster(kube, live_cluster, cooldownPeriod="2h")

        refused = client.post(url, form)
        assert refused.status_code == 200
        page = html.unescape(refused.content.decode())
        assert "changed since you opened it" in page
        assert 'spec.cooldownPeriod is "2h" now, yours "10m"' in page
        assert kube.read(KIND, "mistral-7b")["spec"]["cooldownPeriod"] == "2h"
        assert row().spec["memory"] == "8Gi"

        again = client.post(url, form_fields(refused.content.decode()))
        assert again.status_code == 302  # seen and confirmed: the person's values win
        assert kube.read(KIND, "mistral-7b")["spec"]["memory"] == "12Gi"

    def test_admin_shows_the_differences(self, live_cluster, kube, editor, client) -> None:
        obj = create_through_api(editor, kube)
        client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
        url = reverse("admin:models_app_inferencemodel_change", args=[obj.pk])
        form = form_fields(client.get(url).content.decode())
        form["spec"] = form["spec"].replace("memory: 8Gi", "memory: 12Gi", 1)
        changed_in_the_cluster(kube, live_cluster, cooldownPeriod="2h")
        refused = client.post(url, form)
        page = html.unescape(refused.content.decode())
        assert "changed since you opened it" in page and 'spec.cooldownPeriod is "2h" now, yours "10m"' in page
        assert kube.read(KIND, "mistral-7b")["spec"]["cooldownPeriod"] == "2h"
        assert client.post(url, form_fields(refused.content.decode())).status_code == 302
        assert kube.read(KIND, "mistral-7b")["spec"]["memory"] == "12Gi"


def test_concurrent_patches_over_http_lose_no_label(live_cluster, kube, editor, live_server, make_user) -> None:
    """50 PATCHes at once, each adding its own label, through a real HTTP server (a thread and a
    database connection per request): every one is kept, in the portal and in the cluster."""
    obj = create_through_api(editor, kube)
    _, key = issue_token(make_user("patcher", perms=ALL_KIND_PERMS), "concurrency")
    start = threading.Barrier(50)
    http = requests.Session()
    # The test server's listen backlog is 10: a connection beyond it may be reset before its request
    # is read. Sending it again is safe, as adding the same label twice is the same edit.
    retry = Retry(total=5, allowed_methods=None, backoff_factor=0.05)
    http.mount("http://", requests.adapters.HTTPAdapter(max_retries=retry, pool_maxsize=50))

    def add_label(index: int) -> int:
        start.wait()
        response = http.patch(
            f"{live_server.url}{URL}{obj.pk}/",
            json={"metadata": {"labels": {f"l{index}": "x"}}},
            # one request per connection: a kept-alive one would hold its server thread, and that
            # thread's database connection, past the test (the test database could not be dropped)
            headers={"Authorization": f"Token {key}", "Connection": "close"},
            timeout=60,
        )
        return response.status_code

    with ThreadPoolExecutor(50) as pool:
        statuses = list(pool.map(add_label, range(50)))
    assert statuses == [200] * 50
    expected = {f"l{index}": "x" for index in range(50)}
    assert row().labels == expected
    if row().sync_state == SyncState.PENDING_APPLY:  # the last applies may have met a busy cluster
        apply_object(InferenceModel, obj.pk)
    assert kube.read(KIND, "mistral-7b")["metadata"]["labels"] == expected


class TestClusterSideOrder:
    """What the cluster reported after a list began, or after a write was sent, is never replaced by
    that list's or that write's older answer (resourceVersions are opaque: decided by time)."""

    def test_resync_keeps_what_the_watcher_wrote_after_the_list_began(self, live_cluster, kube) -> None:
        for name in ("a-model", "b-model"):
            manifest = sample_manifest("inferencemodel-mistral-7b.yaml", kube.namespace)
            manifest["metadata"]["name"] = name
            kube.write(manifest)
        resync_cluster(live_cluster)
        b_uid = row("b-model").uid

        def watcher_meanwhile() -> None:
            """Between the list's pages: a-model changes, b-model goes, and the watcher records both."""
            try:
                current = kube.read(KIND, "a-model")
                current["spec"]["cooldownPeriod"] = "2h"
                kube.write(current)
                upsert_from_cluster(InferenceModel, live_cluster, kube.read(KIND, "a-model"))
                kube.remove(KIND, "b-model")
                mark_deleted_in_cluster(InferenceModel, live_cluster, kube.namespace, "b-model", b_uid)
            finally:
                connections.close_all()

        hook = kube.proxy.before("list", "inferencemodels", watcher_meanwhile, query_key="continue")
        gateway = ClusterGateway(live_cluster)
        try:
            resync_namespace(gateway, InferenceModel, kube.namespace, ResyncReport("InferenceModel"), page_size=1)
        finally:
            gateway.close()
        assert hook.times == 0
        in_cluster = kube.read(KIND, "a-model")
        assert row("a-model").spec["cooldownPeriod"] == "2h"
        assert row("a-model").resource_version == in_cluster["metadata"]["resourceVersion"]
        assert row("b-model").sync_state == SyncState.DELETED_IN_CLUSTER

    def _patch_then(self, monkeypatch, meanwhile) -> list[dict]:
        """Run ``meanwhile(answer)`` after the first PATCH reached the cluster, before its answer is stored."""
        original = ClusterGateway.patch
        answers: list[dict] = []

        def patch(gateway, *args, **kwargs):
            answer = original(gateway, *args, **kwargs)
            answers.append(answer)
            if len(answers) == 1:
                meanwhile(answer)
            return answer

        monkeypatch.setattr(ClusterGateway, "patch", patch)
        return answers

    def test_an_apply_answer_older_than_a_watch_event_is_not_stored(
        self, live_cluster, kube, editor, monkeypatch
    ) -> None:
        obj = create_through_api(editor, kube)

        def another_writer(_answer: dict) -> None:
            current = kube.read(KIND, "mistral-7b")
            current["spec"]["cooldownPeriod"] = "2h"
            kube.write(current)
            upsert_from_cluster(InferenceModel, live_cluster, kube.read(KIND, "mistral-7b"))  # the watch event

        self._patch_then(monkeypatch, another_writer)
        assert editor.patch(f"{URL}{obj.pk}/", {"spec": {"memory": "12Gi"}}, format="json").status_code == 200
        in_cluster = kube.read(KIND, "mistral-7b")
        assert (in_cluster["spec"]["memory"], in_cluster["spec"]["cooldownPeriod"]) == ("12Gi", "2h")
        assert row().sync_state == SyncState.SYNCED
        assert row().resource_version == in_cluster["metadata"]["resourceVersion"]
        assert row().spec == in_cluster["spec"]

    def test_the_watch_event_of_the_own_apply_settles_the_row_in_one_write(
        self, live_cluster, kube, editor, monkeypatch
    ) -> None:
        obj = create_through_api(editor, kube)
        def own_event(answer: dict) -> None:
            upsert_from_cluster(InferenceModel, live_cluster, answer)

        answers = self._patch_then(monkeypatch, own_event)
        assert editor.patch(f"{URL}{obj.pk}/", {"spec": {"memory": "12Gi"}}, format="json").status_code == 200
        assert len(answers) == 1
        assert row().sync_state == SyncState.SYNCED
        assert row().resource_version == answers[0]["metadata"]["resourceVersion"]
        assert not AuditEntry.objects.filter(object_id=obj.pk, action="merged").exists()


def test_a_deleting_object_refuses_edits_everywhere(live_cluster, kube, editor, client) -> None:
    obj = create_through_api(editor, kube)
    current = kube.read(KIND, "mistral-7b")
    current["metadata"]["finalizers"] = ["inference.eh-ops.io/finalizer"]
    kube.write(current, field_manager="controller")
    resync_cluster(live_cluster)
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    pages = [PAGE.format(pk=obj.pk, mode="edit"), PAGE.format(pk=obj.pk, mode="yaml"),
             reverse("admin:models_app_inferencemodel_change", args=[obj.pk])]  # fmt: skip
    forms = [form_fields(client.get(url).content.decode()) for url in pages]
    assert editor.delete(f"{URL}{obj.pk}/").status_code == 202
    assert row().sync_state == SyncState.DELETING

    response = editor.patch(f"{URL}{obj.pk}/", {"spec": {"memory": "12Gi"}}, format="json")
    assert response.status_code == 409
    assert response.json()["state"] == SyncState.DELETING and "being deleted" in response.json()["detail"]
    for url, form in zip(pages, forms, strict=True):
        refused = client.post(url, form)
        assert refused.status_code == 200 and "is being deleted" in refused.content.decode(), url
    assert row().sync_state == SyncState.DELETING
    assert kube.read(KIND, "mistral-7b")["metadata"]["deletionTimestamp"]

    held = kube.read(KIND, "mistral-7b")
    held["metadata"]["finalizers"] = []
    kube.write(held, field_manager="controller")
    resync_cluster(live_cluster)
    assert row().sync_state == SyncState.DELETED_IN_CLUSTER


def test_an_edit_saved_while_the_previous_apply_is_in_flight_is_no_conflict(live_cluster, kube, editor) -> None:
    """Two quick edits: the second is saved while the first's write is on the wire. The first's
    answer becomes the second's merge base, so the second applies on top; before, it met its own
    earlier apply as a change of the cluster's and stopped as a Conflict."""
    obj = create_through_api(editor, kube)

    def newer_edit_saved_meanwhile() -> None:
        try:
            row_now = InferenceModel.objects.get(pk=obj.pk)
            row_now.spec = {**row_now.spec, "memory": "14Gi"}
            row_now.sync_state = SyncState.PENDING_APPLY
            row_now.save()  # saved; its own apply task has not run yet
        finally:
            connections.close_all()  # the proxy's thread outlives the test

    InferenceModel.objects.filter(pk=obj.pk).update(spec={**obj.spec, "memory": "12Gi"},
                                                    sync_state=SyncState.PENDING_APPLY)
    kube.proxy.before("patch", "inferencemodels", newer_edit_saved_meanwhile)
    assert str(apply_object(InferenceModel, obj.pk)) == "applied"  # the first edit's write (12Gi)
    assert kube.read(KIND, "mistral-7b")["spec"]["memory"] == "12Gi"
    assert str(apply_object(InferenceModel, obj.pk)) == "applied"  # the newer edit's task
    assert row().sync_state == SyncState.SYNCED, row().conflict
    assert kube.read(KIND, "mistral-7b")["spec"]["memory"] == "14Gi"
