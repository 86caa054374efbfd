"""The catalog's sorts read by index (models_app.catalog.CatalogRows): one B-tree per sortable column
that the spec sets (or that was indexed already), with the catalog's tie-breakers, so a page in
either direction is an index-only scan of the keys, however deep. PostgreSQL only.

``(engine|memory_bytes|ready, ...)`` replace the single-column indexes, which they cover. Columns
the cluster's status rewrites (utilization, GPUs in use, phase) get none: an index on them would
make each status update a non-HOT one (see 0009); their sorts read every matching row's narrow
key tuple and sort it, a full scan (the gap docs/serving.md names). ``node_pool`` may hold longer
values than a B-tree entry can, and ``cluster_name`` is another table's: sorted the same way.
"""

from django.db import migrations, models

from clusters.postgres_only import sort_indexes

SORTED = ("namespace", "engine", "memory_bytes", "ready", "replicas", "accelerator")


class Migration(migrations.Migration):
    dependencies = [
        ("models_app", "0009_mirror_tables_leave_room_for_updates"),
    ]

    operations = [
        migrations.AlterField(
            model_name="inferencemodel",
            name="engine",
            field=models.CharField(blank=True, editable=False, max_length=64),
        ),
        migrations.AlterField(
            model_name="inferencemodel",
            name="memory_bytes",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AlterField(
            model_name="inferencemodel",
            name="ready",
            field=models.BooleanField(default=False, editable=False),
        ),
        migrations.AlterField(
            model_name="kubeaimodel",
            name="engine",
            field=models.CharField(blank=True, editable=False, max_length=64),
        ),
        migrations.AlterField(
            model_name="kubeaimodel",
            name="memory_bytes",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AlterField(
            model_name="kubeaimodel",
            name="ready",
            field=models.BooleanField(default=False, editable=False),
        ),
        migrations.AlterField(
            model_name="modelservice",
            name="engine",
            field=models.CharField(blank=True, editable=False, max_length=64),
        ),
        migrations.AlterField(
            model_name="modelservice",
            name="memory_bytes",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AlterField(
            model_name="modelservice",
            name="ready",
            field=models.BooleanField(default=False, editable=False),
        ),
        sort_indexes("models_app_inferencemodel", SORTED),
        sort_indexes("models_app_kubeaimodel", SORTED),
        sort_indexes("models_app_modelservice", SORTED),
    ]
