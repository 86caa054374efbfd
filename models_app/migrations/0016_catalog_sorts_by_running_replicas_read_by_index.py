"""The catalog's Replicas column is the replicas the cluster reports (``running_replicas``: 0 for a
model at zero), not the spec's count (an InferenceModel's ``maxReplicas`` showed 1 for a model
scaled to zero, issue 43); its sort reads ``(running_replicas, namespace, name, id)`` in order, as
every catalog sort does (migration 0012). The count changes when the model scales, not with every
status report (as phase and GPUs, indexed by 0012), so the index costs few non-HOT updates.
PostgreSQL only."""

from django.db import migrations

from clusters.postgres_only import sort_indexes


class Migration(migrations.Migration):
    dependencies = [
        ("models_app", "0015_admin_ready_filter_read_by_index"),
    ]

    operations = [
        sort_indexes(table, ("running_replicas",))
        for table in ("models_app_inferencemodel", "models_app_kubeaimodel", "models_app_modelservice")
    ]
