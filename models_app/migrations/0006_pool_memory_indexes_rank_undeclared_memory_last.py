"""(cluster, pool, memory DESC NULLS LAST): models without declared memory hold GPUs and are
listed after every model that declares memory (PostgreSQL only)."""

from django.db import migrations

from clusters.postgres_only import pool_memory_index_undeclared_last


class Migration(migrations.Migration):
    dependencies = [
        ("models_app", "0005_pool_memory_indexes"),
    ]

    operations = [
        pool_memory_index_undeclared_last(table)
        for table in ("models_app_inferencemodel", "models_app_kubeaimodel", "models_app_modelservice")
    ]
