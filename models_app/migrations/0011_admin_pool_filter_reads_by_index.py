"""The admin's pool filter in cluster order by index: ``(node_pool, cluster_id, namespace, name)``
for values a B-tree entry can hold (clusters.web.admin.IndexedValuesFilter adds the matching
``length(node_pool) <= 600`` to a filtered changelist), so its count per cluster and its page at
any depth are index-only scans (before: 20,000 heap pages read for one pool at 100,000 rows).
PostgreSQL only."""

from django.db import migrations

from clusters.postgres_only import PostgreSQLOnly, short_pool_index


def pool_in_cluster_order(table: str) -> PostgreSQLOnly:
    return short_pool_index(table, "pool_cluster_order", "node_pool, cluster_id, namespace, name")


class Migration(migrations.Migration):
    dependencies = [("models_app", "0010_catalog_sorts_read_by_index")]

    operations = [
        pool_in_cluster_order("models_app_inferencemodel"),
        pool_in_cluster_order("models_app_kubeaimodel"),
        pool_in_cluster_order("models_app_modelservice"),
    ]
