"""Every sort and filter of the runs' and configs' admin changelists read by index (issue 41), as
models_app 0010, 0012 and 0017 do for the serving kinds; PostgreSQL only.

- **Sorts**: ``(column, namespace, name, id)`` (``sort_indexes``; for text columns, which may hold
  more than a B-tree entry can, over the values of at most 500 characters, with the longer ones'
  ids apart: ``text_sort_indexes``): a page, the last too, read in index order instead of every
  row sorted.
- **Filters in cluster order**: ``(column, cluster_id, namespace, name, id)``
  (``cluster_order_indexes``): a filtered page's count per cluster and its offset read in the
  index alone.

A run's phase and every sync state were indexed already (their updates were never HOT ones); the
other columns come from the spec, which status reports leave alone.
"""

from django.db import migrations

from clusters.postgres_only import cluster_order_indexes, sort_indexes, text_sort_indexes

CONFIGS, RUNS = "runs_app_inferenceconfig", "runs_app_inferencerun"


class Migration(migrations.Migration):
    dependencies = [
        ("runs_app", "0005_mirror_tables_leave_room_for_updates"),
    ]

    operations = [
        sort_indexes(CONFIGS, ("namespace", "sync_state", "auto_delete_policy")),
        sort_indexes(RUNS, ("namespace", "sync_state", "phase", "timeout_seconds")),
        text_sort_indexes(CONFIGS, ("model_name", "image")),
        text_sort_indexes(RUNS, ("config_name", "schedule")),
        cluster_order_indexes(CONFIGS, ("cluster", "namespace", "sync_state", "auto_delete_policy")),
        cluster_order_indexes(RUNS, ("cluster", "namespace", "sync_state", "phase")),
    ]
