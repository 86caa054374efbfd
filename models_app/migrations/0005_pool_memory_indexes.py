"""(cluster, pool, memory) indexes for planning's biggest holders per pool (PostgreSQL only)."""

from django.db import migrations

from clusters.postgres_only import pool_memory_index


class Migration(migrations.Migration):
    dependencies = [
        ("models_app", "0004_serving_kinds_declare_pods_and_idleness"),
    ]

    operations = [
        pool_memory_index(table)
        for table in ("models_app_inferencemodel", "models_app_kubeaimodel", "models_app_modelservice")
    ]
