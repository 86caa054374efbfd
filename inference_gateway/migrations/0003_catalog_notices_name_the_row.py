"""A serving kind's notice names the row that changed (``table id``), so the gateway reads that row
alone instead of every route (``inference_gateway.catalog``). PostgreSQL only.

Migration 0002 notified once per statement for inserts and deletes and with the table's name alone;
these row triggers say which row. ``ready`` and ``cluster_created_at`` now count as routed columns:
the gateway no longer re-reads its routes every few seconds, so readiness (which a shared id's
choice and the wake read) and OpenAI's ``created`` come with the notices too. A ``TRUNCATE`` says
the table alone (the gateway then compares every row's version). A cluster's managed kinds (which
models are woken) and name (in refusals) notify as the cluster's table (a deleted cluster's rows
notify themselves, as the delete cascades). The statement triggers of
the other tables, and the function governance's triggers share (``inference_gateway_notify``), stay.
"""

from django.db import migrations

from clusters.postgres_only import PostgreSQLOnly

CHANNEL = "inference_gateway_catalog"
SERVING = ("models_app_inferencemodel", "models_app_kubeaimodel", "models_app_modelservice")
ROUTED_COLUMNS = ("cluster_id", "namespace", "name", "model_name", "spec", "sync_state", "ready",
                  "cluster_created_at")
OLD_ROUTED_COLUMNS = ("cluster_id", "namespace", "name", "model_name", "spec", "sync_state")


def _changed(columns: tuple[str, ...]) -> str:
    return " OR ".join(f"OLD.{column} IS DISTINCT FROM NEW.{column}" for column in columns)


FORWARD = [
    f"""CREATE OR REPLACE FUNCTION inference_gateway_notify_row() RETURNS trigger AS $$
        BEGIN
            IF TG_OP = 'DELETE' THEN
                PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME || ' ' || OLD.id);
            ELSE
                PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME || ' ' || NEW.id);
            END IF;
            RETURN NULL;
        END $$ LANGUAGE plpgsql""",
    *(statement for table in SERVING for statement in (
        f"DROP TRIGGER IF EXISTS inference_gateway_notify_rows ON {table}",
        f"DROP TRIGGER IF EXISTS inference_gateway_notify_changes ON {table}",
        f"""CREATE TRIGGER inference_gateway_notify_rows AFTER INSERT OR DELETE ON {table}
            FOR EACH ROW EXECUTE FUNCTION inference_gateway_notify_row()""",
        f"""CREATE TRIGGER inference_gateway_notify_changes AFTER UPDATE ON {table}
            FOR EACH ROW WHEN ({_changed(ROUTED_COLUMNS)}) EXECUTE FUNCTION inference_gateway_notify_row()""",
        f"""CREATE TRIGGER inference_gateway_notify_truncate AFTER TRUNCATE ON {table}
            FOR EACH STATEMENT EXECUTE FUNCTION inference_gateway_notify()""",
    )),
    f"""CREATE TRIGGER inference_gateway_notify_clusters AFTER UPDATE ON clusters_cluster
        FOR EACH ROW WHEN ({_changed(("managed_kinds", "name"))})
        EXECUTE FUNCTION inference_gateway_notify()""",
]

BACKWARD = [
    "DROP TRIGGER IF EXISTS inference_gateway_notify_clusters ON clusters_cluster",
    *(statement for table in SERVING for statement in (
        f"DROP TRIGGER IF EXISTS inference_gateway_notify_truncate ON {table}",
        f"DROP TRIGGER IF EXISTS inference_gateway_notify_rows ON {table}",
        f"DROP TRIGGER IF EXISTS inference_gateway_notify_changes ON {table}",
        f"""CREATE TRIGGER inference_gateway_notify_rows AFTER INSERT OR DELETE ON {table}
            FOR EACH STATEMENT EXECUTE FUNCTION inference_gateway_notify()""",
        f"""CREATE TRIGGER inference_gateway_notify_changes AFTER UPDATE ON {table}
            FOR EACH ROW WHEN ({_changed(OLD_ROUTED_COLUMNS)}) EXECUTE FUNCTION inference_gateway_notify()""",
    )),
    "DROP FUNCTION IF EXISTS inference_gateway_notify_row()",
]


class Migration(migrations.Migration):
    dependencies = [
        ("inference_gateway", "0002_catalog_notices"),
        ("models_app", "0014_last_requests_read_from_the_pool_index"),
        ("clusters", "0010_audit_log_read_in_index_order"),
    ]

    operations = [PostgreSQLOnly(sql=FORWARD, reverse_sql=BACKWARD)]
