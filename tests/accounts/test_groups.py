"""The ready-made groups: "ML team member" works with the mirrored kinds in its teams'
namespaces; "Platform staff" also runs clusters, teams and pools (docs/security.md, "Teams and access")."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client


def test_ready_made_groups_make_a_new_user_one_click_from_working(db, world) -> None:
    member = User.objects.create_user("nina", password="pw")
    member.groups.add(Group.objects.get(name="ML team member"))
    world.vision.members.add(member)
    browser = Client()
    browser.force_login(member)
    config = world.objects[("InferenceConfig", "vision")]
    created = browser.post("/runs/new/", {"config": config.pk, "name": "first", "timeout_seconds": 60})
    assert created.status_code == 302
    model = world.objects[("InferenceModel", "vision")]
    assert browser.get(f"/models/inferencemodels/{model.pk}/delete/").status_code == 200
    assert browser.get("/api/clusters/").status_code == 403  # clusters are platform staff's

    platform = User.objects.create_user("paula", password="pw", is_staff=True)
    platform.groups.add(Group.objects.get(name="Platform staff"))
    browser.force_login(platform)
    assert browser.get("/api/clusters/").status_code == 200
    assert browser.get(f"/admin/clusters/cluster/{world.cluster.pk}/change/").status_code == 200
    assert browser.get("/admin/accounts/team/add/").status_code == 200
    assert browser.get("/admin/scheduler/nodepool/").status_code == 200
    assert not Group.objects.get(name="ML team member").permissions.filter(content_type__app_label="clusters").exists()


@pytest.mark.django_db(transaction=True)
def test_the_ready_made_groups_come_back_after_a_flush() -> None:
    """``manage.py flush`` empties every table, and so does every transactional test's teardown: the
    groups come back with their permissions (a test run after such a teardown found none)."""
    call_command("flush", interactive=False, verbosity=0)

    member = Group.objects.get(name="ML team member")
    assert set(member.permissions.filter(content_type__app_label="models_app").values_list("codename", flat=True)) >= {
        "view_inferencemodel", "change_kubeaimodel", "delete_modelservice"}
    assert Group.objects.get(name="Platform staff").permissions.filter(codename="change_cluster").exists()
