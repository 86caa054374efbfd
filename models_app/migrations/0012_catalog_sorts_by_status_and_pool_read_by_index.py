"""Every catalog sort read by index (models_app.catalog.CatalogRows); PostgreSQL only. Migration 0010
left the status's columns, the sync state and the pool to a full scan: 100-300 ms of SQL a page at
100,000 rows, 50,000 heap pages of wide rows read for 26 keys.

- **Sync state, phase, GPUs**: ``(column, namespace, name, id)`` in each kind's table. Their
  values change when the model changes state (a sync, a scale, a failure), not with every status
  report; ``sync_state`` was indexed already, so its updates were never HOT ones.
- **Utilization** changes with every status report, so its index lives apart, in
  ``models_app_utilizationsortkey`` (one narrow row per InferenceModel), kept by statement-level
  triggers with transition tables on InferenceModel's table: every write path counts (the
  portal's saves, the watcher, the bulk resync's COPY and ``UPDATE ... FROM``, cascades,
  TRUNCATE), one statement's rows in one upsert in id order (so two writers lock in the same
  order), and an update that changes none of the key's columns writes nothing.
- **Pool**: ``(node_pool, namespace, name, id)`` for values a B-tree entry can hold
  (``length(node_pool) <= 600``); the catalog reads the (rare) longer ones apart and merges.
"""

from django.db import migrations, models

from clusters.postgres_only import PostgreSQLOnly, short_pool_index, sort_indexes

SORTED = ("sync_state", "phase", "gpu_count")
KINDS = ("models_app_inferencemodel", "models_app_kubeaimodel", "models_app_modelservice")
MODELS, KEYS = "models_app_inferencemodel", "models_app_utilizationsortkey"
FUNCTION = f"{MODELS}_utilization_sort_key"
UPSERT = (
    f"INSERT INTO {KEYS} (model_id, namespace, name, utilization) {{rows}} "
    "ON CONFLICT (model_id) DO UPDATE SET namespace = EXCLUDED.namespace, name = EXCLUDED.name, "
    "utilization = EXCLUDED.utilization"
)
CHANGED = (
    "SELECT n.id, n.namespace, n.name, n.utilization_percent FROM new_rows n JOIN old_rows o ON o.id = n.id "
    "WHERE (n.namespace, n.name, n.utilization_percent) IS DISTINCT FROM (o.namespace, o.name, o.utilization_percent) "
    "ORDER BY n.id"
)
TRIGGERS = {
    "insert": "AFTER INSERT ON {t} REFERENCING NEW TABLE AS new_rows",
    "update": "AFTER UPDATE ON {t} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
    "delete": "AFTER DELETE ON {t} REFERENCING OLD TABLE AS old_rows",
    "truncate": "AFTER TRUNCATE ON {t}",
}


def utilization_keys_kept() -> PostgreSQLOnly:
    """The function and triggers that keep ``models_app_utilizationsortkey``, and its rows filled."""
    body = (
        f"CREATE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF TG_OP = 'INSERT' THEN "
        + UPSERT.format(rows="SELECT id, namespace, name, utilization_percent FROM new_rows ORDER BY id")
        + "; ELSIF TG_OP = 'UPDATE' THEN "
        + UPSERT.format(rows=CHANGED)
        + f"; ELSIF TG_OP = 'DELETE' THEN DELETE FROM {KEYS} WHERE model_id IN (SELECT id FROM old_rows); "
        f"ELSE DELETE FROM {KEYS}; END IF; RETURN NULL; END $$"
    )
    triggers = [
        f"CREATE TRIGGER {MODELS}_utilization_key_{event} {clause.format(t=MODELS)} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}()"
        for event, clause in TRIGGERS.items()
    ]
    fill = UPSERT.format(rows=f"SELECT id, namespace, name, utilization_percent FROM {MODELS} ORDER BY id")
    return PostgreSQLOnly(
        sql=[body, *triggers, fill],
        reverse_sql=[
            *(f"DROP TRIGGER {MODELS}_utilization_key_{event} ON {MODELS}" for event in reversed(TRIGGERS)),
            f"DROP FUNCTION {FUNCTION}()",
            f"DELETE FROM {KEYS}",
        ],
    )


class Migration(migrations.Migration):
    dependencies = [
        ("models_app", "0011_admin_pool_filter_reads_by_index"),
    ]

    operations = [
        migrations.CreateModel(
            name="UtilizationSortKey",
            fields=[
                (
                    "model_id",
                    models.BigIntegerField(help_text="The InferenceModel's id.", primary_key=True, serialize=False),
                ),
                ("namespace", models.CharField(max_length=63)),
                ("name", models.CharField(max_length=253)),
                ("utilization", models.PositiveSmallIntegerField(null=True)),
            ],
            options={
                "indexes": [
                    models.Index(fields=["utilization", "namespace", "name", "model_id"], name="utilization_sort")
                ],
            },
        ),
        utilization_keys_kept(),
        *(sort_indexes(table, SORTED) for table in KINDS),
        *(short_pool_index(table, "node_pool_sort", "node_pool, namespace, name, id") for table in KINDS),
    ]
