"""A pool's last requests read from the (cluster, pool, memory) index alone: it carries each row's
id and ``last_active_at`` (see clusters.postgres_only.pool_memory_index_with_last_requests).
PostgreSQL only."""

from django.db import migrations

from clusters.postgres_only import pool_memory_index_with_last_requests

KINDS = ("models_app_inferencemodel", "models_app_kubeaimodel", "models_app_modelservice")


class Migration(migrations.Migration):
    dependencies = [("models_app", "0013_admin_pool_pages_read_from_the_index_alone")]

    operations = [pool_memory_index_with_last_requests(table) for table in KINDS]
