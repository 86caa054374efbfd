"""Triggers that publish catalog changes (``inference_gateway.notices``), on PostgreSQL only."""

from django.db import migrations

CHANNEL = "inference_gateway_catalog"
# Rows whose every change matters; a serving kind's row matters when what routes it changes.
ANY_CHANGE = ("inference_gateway_sharednamespace", "inference_gateway_backendhost",
              "inference_gateway_sharedgatewayid", "accounts_namespacegrant")
SERVING = ("models_app_inferencemodel", "models_app_kubeaimodel", "models_app_modelservice")
ROUTED_COLUMNS = ("cluster_id", "namespace", "name", "model_name", "spec", "sync_state")


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"""
        CREATE OR REPLACE FUNCTION inference_gateway_notify() RETURNS trigger AS $$
        BEGIN PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME); RETURN NULL; END $$ LANGUAGE plpgsql""")
    for table in ANY_CHANGE:
        schema_editor.execute(f"""
            CREATE TRIGGER inference_gateway_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table}
            FOR EACH STATEMENT EXECUTE FUNCTION inference_gateway_notify()""")
    changed = " OR ".join(f"OLD.{column} IS DISTINCT FROM NEW.{column}" for column in ROUTED_COLUMNS)
    for table in SERVING:
        schema_editor.execute(f"""
            CREATE TRIGGER inference_gateway_notify_rows AFTER INSERT OR DELETE ON {table}
            FOR EACH STATEMENT EXECUTE FUNCTION inference_gateway_notify()""")
        schema_editor.execute(f"""
            CREATE TRIGGER inference_gateway_notify_changes AFTER UPDATE ON {table}
            FOR EACH ROW WHEN ({changed}) EXECUTE FUNCTION inference_gateway_notify()""")


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in ANY_CHANGE:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS inference_gateway_notify ON {table}")
    for table in SERVING:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS inference_gateway_notify_rows ON {table}")
        schema_editor.execute(f"DROP TRIGGER IF EXISTS inference_gateway_notify_changes ON {table}")
    schema_editor.execute("DROP FUNCTION IF EXISTS inference_gateway_notify()")


class Migration(migrations.Migration):
    dependencies = [
        ("inference_gateway", "0001_initial"),
        ("models_app", "0009_mirror_tables_leave_room_for_updates"),
        ("accounts", "0003_ready_made_groups"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
