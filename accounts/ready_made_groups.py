"""The two ready-made groups (accounts migration 0003 made them first): *ML team member* and
*Platform staff*, so a new user is one click from working (README "Teams and access").

They are rows, and ``manage.py flush`` (and every transactional test's teardown, which is one)
empties every table: :func:`ensure_after_migrate` puts them back on ``post_migrate``, which
follows both ``migrate`` and ``flush``. Updated, never duplicated.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps as global_apps
from django.apps.registry import Apps
from django.contrib.auth.management import create_permissions

ACTIONS = ("view", "add", "change", "delete")
MEMBER_MODELS = [
    ("models_app", "inferencemodel"),
    ("models_app", "kubeaimodel"),
    ("models_app", "modelservice"),
    ("runs_app", "inferenceconfig"),
    ("runs_app", "inferencerun"),
]
STAFF_MODELS = [
    ("clusters", "cluster", ACTIONS),
    ("clusters", "auditentry", ("view",)),
    ("clusters", "syncstat", ("view",)),
    ("accounts", "team", ACTIONS),
    ("accounts", "namespacegrant", ACTIONS),
    ("scheduler", "nodepool", ACTIONS),
    ("scheduler", "node", ("view",)),
    ("scheduler", "memoryreservation", ("view", "delete")),
    ("rightsizing", "refresh", ("view",)),
    ("rightsizing", "observation", ("view",)),
]
GROUPS = {
    "ML team member": [(app, model, ACTIONS) for app, model in MEMBER_MODELS],
    "Platform staff": [*((app, model, ACTIONS) for app, model in MEMBER_MODELS), *STAFF_MODELS],
}
GRANTING_APPS = sorted({app for grants in GROUPS.values() for app, _, _ in grants})
"""The apps whose permissions the groups hold."""


def ensure_groups(apps: Apps, using: str = "default") -> None:
    """Each group with every permission of its grants (which must exist): one read of the
    permissions, then each group's added (a flush's teardown runs this, so it stays a few queries)."""
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    known = {(app, codename): pk for app, codename, pk in Permission.objects.using(using).filter(
        content_type__app_label__in=GRANTING_APPS).values_list("content_type__app_label", "codename", "pk")}
    for name, grants in GROUPS.items():
        wanted = [(app, f"{action}_{model}") for app, model, actions in grants for action in actions]
        missing = [f"{app}.{codename}" for app, codename in wanted if (app, codename) not in known]
        if missing:
            raise RuntimeError(f"missing permissions: {', '.join(missing)}")
        group, _ = Group.objects.using(using).get_or_create(name=name)
        group.permissions.add(*(known[key] for key in wanted))


def ensure_after_migrate(apps: Apps = global_apps, using: str = "default", **_: Any) -> None:
    """``post_migrate`` of this app: the permissions the groups grant (post_migrate reaches the
    apps after this one later), then the groups."""
    for label in GRANTING_APPS:
        create_permissions(global_apps.get_app_config(label), verbosity=0, using=using, apps=apps)
    ensure_groups(apps, using)
