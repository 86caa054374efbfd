"""The admin's ``ready`` filter read by index at 100,000 rows (issue 41): ``(ready, cluster_id,
namespace, name, id)``, so the filter's count per cluster and its pages in cluster order
(clusters.web.api.pagination) read the matching index entries alone instead of every row (225-325
ms of PostgreSQL each). Readiness changes seldom, and already has an index (0010): status updates
that leave it alone stay HOT (0009). PostgreSQL only."""

from django.db import migrations

from clusters.postgres_only import PostgreSQLOnly

TABLE = "models_app_inferencemodel"


class Migration(migrations.Migration):
    dependencies = [("models_app", "0014_last_requests_read_from_the_pool_index")]

    operations = [
        PostgreSQLOnly(
            sql=f"CREATE INDEX {TABLE}_ready_cluster_order ON {TABLE} (ready, cluster_id, namespace, name, id)",
            reverse_sql=f"DROP INDEX {TABLE}_ready_cluster_order",
        ),
    ]
