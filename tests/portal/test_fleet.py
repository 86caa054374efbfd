"""Fleet pages: the pods and events of every namespace a person may see, read live from the real
control plane and linked to the mirrored objects that own them; the audit log of every object
they may see, filtered by who, kind, cluster and days; a cluster that cannot be read is named."""

from __future__ import annotations

import re

from django.test import Client
from django.utils import timezone

from accounts.models import NamespaceGrant
from clusters.models import AuditEntry, Cluster
from clusters.web import list_costs
from tests.clusters.conftest import wait_for
from tests.conftest import ALL_KIND_PERMS
from tests.portal.test_live_objects import running_llama, teams  # noqa: F401 - a fixture
from tests.support.html_forms import form_fields
from tests.support.silent_server import SilentServer


def test_pods_and_events_of_the_fleet_link_to_their_models(managed, teams) -> None:  # noqa: F811
    kube, cluster = managed
    member, other = teams
    model = running_llama(kube, cluster)
    selector = "app.kubernetes.io/name=llama-2-7b"
    pods = [pod["metadata"]["name"] for pod in kube.list("v1", "Pod", label_selector=selector)]

    page = wait_for(lambda: (text := member.get("/fleet/pods/").content.decode()) and all(
        f"<code>{pod}</code>" in text for pod in pods) and text, timeout=30,
        message="the pods in the informer's cache")  # the watch brings them a moment after kwok runs them
    assert f'<a href="/models/inferencemodels/{model.pk}/" class="owner-link">InferenceModel/llama-2-7b</a>' in page
    assert "<time datetime=" in page and "ReplicaSet/llama-2-7b-" in page
    assert f"<code>{pods[0]}</code>" not in other.get("/fleet/pods/").content.decode()  # another team's namespace
    assert "No pods match these filters." in member.get("/fleet/pods/", {"q": "nomatch"}).content.decode()
    assert f"<code>{pods[0]}</code>" in member.get("/fleet/pods/", {"q": "llama", "phase": "Running"}).content.decode()
    assert f"<code>{pods[0]}</code>" not in member.get("/fleet/pods/", {"phase": "Failed"}).content.decode()

    wait_for(lambda: "ScalingReplicaSet" in member.get("/fleet/events/").content.decode(), timeout=30,
             message="the Deployment controller's event")  # fmt: skip
    events = member.get("/fleet/events/", {"q": "ScalingReplicaSet"}).content.decode()
    assert "<code>Deployment/llama-2-7b</code>" in events and f'href="/models/inferencemodels/{model.pk}/"' in events
    assert "ScalingReplicaSet" not in other.get("/fleet/events/").content.decode()
    nothing = member.get("/fleet/events/", {"type": "Warning", "q": "llama-2-7b-x"}).content.decode()
    assert "No events match these filters." in nothing


def test_a_cluster_that_cannot_be_read_is_named_and_snapshots_are_skipped(make_user, db) -> None:
    Cluster.objects.create(name="gone", auth_method=Cluster.AuthMethod.TOKEN, server_url="https://127.0.0.1:9",
                           bearer_token="t", request_timeout_seconds=2)  # fmt: skip
    Cluster.objects.create(name="snap", auth_method=Cluster.AuthMethod.SNAPSHOT)
    client = Client()
    client.force_login(make_user("someone", perms=ALL_KIND_PERMS))
    page = client.get("/fleet/pods/").content.decode()
    assert "Cluster gone could not be read" in page and "Not read: snap (snapshot without an API server)" in page


def test_a_cluster_that_never_answers_is_named_without_waiting_for_it_and_the_others_are_shown(
    managed,
    teams,  # noqa: F811
) -> None:
    """A cluster whose API server accepts and never answers (its own timeout ten minutes) costs the
    page no wait past FLEET_READ_SECONDS: the page answers (no 500, no wait for the timeout), names
    it, and shows the reachable cluster's pods. A second page joins the read still in flight instead
    of opening another connection to the hung server."""
    kube, cluster = managed
    member, _ = teams
    running_llama(kube, cluster)
    selector = "app.kubernetes.io/name=llama-2-7b"
    pods = [pod["metadata"]["name"] for pod in kube.list("v1", "Pod", label_selector=selector)]
    with SilentServer() as silent:
        hung = Cluster.objects.create(name="hung", auth_method=Cluster.AuthMethod.TOKEN, server_url=silent.url,
                                      bearer_token="t", insecure_skip_tls_verify=True, request_timeout_seconds=600,
                                      namespaces=[kube.namespace])  # fmt: skip
        mine = NamespaceGrant.objects.get(cluster=cluster, namespace=kube.namespace).team
        NamespaceGrant.objects.create(team=mine, cluster=hung, namespace=kube.namespace)

        page = member.get("/fleet/pods/")
        assert page.status_code == 200
        text = page.content.decode()
        assert "Cluster hung did not answer within" in text
        assert all(f"<code>{pod}</code>" in text for pod in pods)  # the reachable cluster, shown whole
        assert wait_for(lambda: silent.accepted == 1, message="the read's connection to the hung server")
        again = member.get("/fleet/pods/", {"q": "llama"}).content.decode()
        assert "Cluster hung did not answer within" in again and f"<code>{pods[0]}</code>" in again
        assert silent.accepted == 1  # joined the read in flight: no second connection


def test_the_audit_log_filters_by_who_kind_cluster_and_days(world) -> None:
    member = world.browser("member")
    model = world.objects[("InferenceModel", "vision")]
    edit = member.get(f"/models/inferencemodels/{model.pk}/edit/")
    assert edit.status_code == 200
    fields = form_fields(edit.content.decode()) | {"memory": "64Gi"}
    assert member.post(f"/models/inferencemodels/{model.pk}/edit/", fields).status_code == 302
    other_model = world.objects[("InferenceModel", "nlp")]
    AuditEntry.objects.create(kind="InferenceModel", object_id=other_model.pk, cluster=world.cluster, namespace="nlp",
                              name=other_model.name, action="updated", source="api", actor_label="otto")  # fmt: skip

    page = member.get("/audit/").content.decode()
    assert f'<a href="/models/inferencemodels/{model.pk}/">{model.name}</a>' in page
    assert "<code>spec.memory</code>" in page
    assert "<td>otto</td>" not in page  # another team's namespace
    staff = world.browser("staff")
    assert "<td>otto</td>" in staff.get("/audit/").content.decode()
    assert "<td>vera</td>" not in staff.get("/audit/", {"who": "otto"}).content.decode()
    mine = {"who": "vera", "kind": "InferenceModel", "cluster": "east"}
    assert "1 change." in staff.get("/audit/", mine).content.decode()
    today = timezone.now().date().isoformat()
    assert "2 changes." in staff.get("/audit/", {"since": today, "until": today}).content.decode()
    assert "No changes match" in staff.get("/audit/", {"until": "2001-01-01"}).content.decode()
    bad = staff.get("/audit/", {"since": "yesterday"})
    assert bad.status_code == 400 and "since" in bad.content.decode()


def test_the_audit_log_pages_show_every_entry_once_newest_first_and_say_about_beyond_the_bound(
    world, monkeypatch
) -> None:
    """Pages are read ids first in the log's (at, id) order and counted up to a bound: walking them
    shows every entry once, newest first (ties of one instant broken by id), and a count above the
    bound is worded as the estimate it is."""
    model = world.objects[("InferenceModel", "nlp")]
    same_instant = timezone.now()
    for index in range(60):
        entry = AuditEntry.objects.create(kind="InferenceModel", object_id=model.pk, cluster=world.cluster,
                                          namespace="nlp", name=model.name, action="updated", source="api",
                                          actor_label=f"writer-{index:02d}")  # fmt: skip
        if index % 3 == 0:
            AuditEntry.objects.filter(pk=entry.pk).update(at=same_instant)
    staff = world.browser("staff")
    expected = list(AuditEntry.objects.filter(actor_label__startswith="writer-").order_by("-at", "-id")
                    .values_list("actor_label", flat=True))  # fmt: skip

    def walk() -> list[str]:
        shown = []
        for number in range(1, 10):
            page = staff.get("/audit/", {"who": "writer", "page": number}).content.decode()
            shown += re.findall(r"<td>(writer-\d\d)</td>", page)
            if "next →" not in page:
                return shown
        raise AssertionError("more pages than rows")

    assert walk() == expected and len(expected) == 60
    monkeypatch.setattr(list_costs, "COUNT_BOUND", 10)
    page = staff.get("/audit/", {"who": "writer"}).content.decode()
    assert "About" in page and "an estimate" in page and " of about " in page
    assert walk() == expected  # the planner guesses fewer than there are: every page is reached still


def test_after_a_failed_read_a_page_names_the_failure_at_once_while_the_cluster_is_asked_again(
    make_user, db, settings
) -> None:
    """A cluster that hangs (its requests time out after 1 s, past FLEET_READ_SECONDS) is read again
    once its failed read is no longer kept, and pages meanwhile name the failure without waiting
    for the new read: a page that waited would say "did not answer within", every time."""
    settings.FLEET_KEPT_SECONDS = 0
    client = Client()
    client.force_login(make_user("someone", perms=ALL_KIND_PERMS, staff=True))
    with SilentServer() as silent:
        Cluster.objects.create(name="hung", auth_method=Cluster.AuthMethod.TOKEN, server_url=silent.url,
                               bearer_token="t", insecure_skip_tls_verify=True, request_timeout_seconds=1)  # fmt: skip
        assert "Cluster hung did not answer within" in client.get("/fleet/pods/").content.decode()
        failed = "Cluster hung could not be read just now"
        assert wait_for(lambda: failed in client.get("/fleet/pods/").content.decode(), timeout=30,
                        message="a page naming the failed read at once")  # fmt: skip
        wait_for(lambda: silent.accepted >= 2, timeout=30, message="the cluster asked again (the informer's relist)")
