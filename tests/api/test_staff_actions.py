"""Who may change what through the API: every state-changing operation of the schema is either a
member's (held to model permissions and the team's namespaces, tested with each endpoint) or
staff's, and a staff action answers 403 to anyone not staff, even one granted every permission.

The operations are read from the OpenAPI schema itself, so a new endpoint that changes state fails
this test until it is put on one side or the other.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

WRITES = ("post", "put", "patch", "delete")
# staff's: they act beyond any one team (limits and quotas of every team, the gateway's placement
# rules, a right-sizing refresh writing every team's objects' status)
STAFF_ACTIONS = re.compile(r"^/api/(limits/|planning/quotas/|gateway/|rightsizing/refresh/|gitops/modes/)")
# members': each held to its model permission and the user's teams' namespaces (or, for clusters,
# to the cluster permissions granted per person, docs/api.md), or storing nothing
MEMBER_ACTIONS = re.compile(
    r"^/api/(apply/|clusters/|token/|planning/(plan|calculator)/|rightsizing/(preview/|(models|\{kind\})/\{id\}/apply/)"
    r"|(inferencemodels|kubeai-models|modelservices|inferenceconfigs|inferenceruns)/)"
)


def state_changing_operations() -> list[tuple[str, str]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return [(method, path) for path, operations in schema["paths"].items() for method in operations
            if method in WRITES]


def test_every_state_changing_operation_is_either_staffs_or_a_members() -> None:
    operations = state_changing_operations()
    assert len(operations) > 40, operations  # the schema really was read
    unclassified = [f"{method.upper()} {path}" for method, path in operations
                    if not STAFF_ACTIONS.match(path) and not MEMBER_ACTIONS.match(path)]
    assert not unclassified, f"say who may call these (STAFF_ACTIONS or MEMBER_ACTIONS): {unclassified}"
    both = [path for _, path in operations if STAFF_ACTIONS.match(path) and MEMBER_ACTIONS.match(path)]
    assert not both, both


def test_no_staff_action_answers_anyone_not_staff(make_user) -> None:
    """A member of a team holding every namespace, granted every model permission there is, is
    still refused every staff action (403), whatever the body; staff are not (the same calls get
    past the permission check)."""
    member = make_user("everything-but-staff")
    member.user_permissions.set(Permission.objects.all())
    staff = make_user("staff", staff=True)
    staff.user_permissions.set(Permission.objects.all())
    clients = {}
    for name, user in (("member", member), ("staff", staff)):
        clients[name] = APIClient()
        clients[name].force_authenticate(user)
    staff_actions = [(method, path) for method, path in state_changing_operations() if STAFF_ACTIONS.match(path)]
    assert len(staff_actions) >= 15, staff_actions
    for method, path in staff_actions:
        url = path.replace("{id}", "999999")
        for body in ({}, {"cluster": ""}, {"cluster": "nope"}):
            answer = getattr(clients["member"], method)(url, body, format="json")
            assert answer.status_code == 403, f"{method.upper()} {url} {body} as a member: {answer.status_code}"
        answer = getattr(clients["staff"], method)(url, {}, format="json")
        assert answer.status_code != 403, f"{method.upper()} {url} as staff: {answer.status_code} {answer.content}"
