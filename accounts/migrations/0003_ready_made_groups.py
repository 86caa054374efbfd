"""Two ready-made groups, so a new user is one click from working (README "Teams and access").

- **ML team member**: works with the mirrored kinds (InferenceModel, KubeAI Model, ModelService,
  InferenceConfig, InferenceRun): view, add, change, delete. *Where* is still their teams'
  namespaces (accounts.access.restrict); the group only says *which kinds*.
- **Platform staff**: everything an ML team member has, plus clusters (credentials, sync settings),
  teams and namespace grants, node pools (budgets), memory reservations, the audit log, sync
  statistics and right-sizing data. The admin also needs the user's "Staff status" flag.

Permissions are created here first (Django creates them after migrations, too late for a fresh
database); the groups are updated, never duplicated, and removing them leaves users alone.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

from accounts.ready_made_groups import GROUPS, ensure_groups


def create_groups(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    ensure_groups(apps)


def remove_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=GROUPS).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_api_tokens"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("clusters", "0007_sync_stats"),
        ("models_app", "0002_projected_columns_hold_what_the_crd_allows"),
        ("runs_app", "0002_projected_columns_hold_what_the_crd_allows"),
        ("scheduler", "0002_nodepool_refreshed_at_memoryreservation_node"),
        ("rightsizing", "0002_projected_columns_hold_what_the_crd_allows"),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]
