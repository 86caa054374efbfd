"""Every sort and filter of the admin's changelists read by index at 100,000 rows (issue 41); PostgreSQL only.

- **Text columns** (model name, URL, resource profile), which may hold more than a B-tree entry
  can: ``(column, namespace, name, id)`` over the values of at most 500 characters and ``(id)`` over
  the longer ones, and statistics on the values' length (clusters.postgres_only
  ``text_sort_indexes``; read by clusters.web.api.pagination.ids_by_text_column); the pool's are
  0012's and 0003's (0005 its statistics). Sorting
  them unindexed cost 0.2-0.9 s of PostgreSQL a page, so the columns had been offered unsorted.
  They change with the spec, not with status reports: status updates stay HOT (0009).
- **Filters in cluster order**: ``(column, cluster_id, namespace, name, id)`` for the cluster, the
  namespace, the sync state and each kind's own filters (as 0013 for the pool and 0015 for
  InferenceModel's readiness): a filtered page counts its rows per cluster and steps to its offset
  in the index alone, where the unique ``(cluster_id, namespace, name)`` index, which holds no id,
  sent every row stepped over to the table. Engine, accelerator, readiness and phase are indexed
  already (0010, 0012), so their updates were never HOT ones; nothing here changes that.
"""

from django.db import migrations

from clusters.postgres_only import cluster_order_indexes, text_sort_indexes

MODELS, KUBEAI, SERVICES = "models_app_inferencemodel", "models_app_kubeaimodel", "models_app_modelservice"


class Migration(migrations.Migration):
    dependencies = [
        ("models_app", "0016_catalog_sorts_by_running_replicas_read_by_index"),
    ]

    operations = [
        text_sort_indexes(MODELS, ("model_name",)),  # the pool's: 0012 (node_pool_sort) and 0003 (node_pool_long)
        text_sort_indexes(KUBEAI, ("url", "resource_profile")),
        text_sort_indexes(SERVICES, ("model_name",)),
        cluster_order_indexes(MODELS, ("cluster", "namespace", "sync_state")),  # ready: 0015
        cluster_order_indexes(KUBEAI, ("cluster", "namespace", "sync_state", "engine", "ready")),
        cluster_order_indexes(SERVICES, ("cluster", "namespace", "sync_state", "accelerator", "phase")),
    ]
