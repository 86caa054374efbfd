"""Limits, teams and team members publish their changes on the gateway's catalog channel.

The gateway holds the limits and every team's members in memory (``governance.gateway.Snapshot``)
and re-reads them on a notice, as it does its routes: the triggers call the function of
``inference_gateway``'s migration 0002 (namespace grants already publish there). PostgreSQL only;
on SQLite the gateway re-reads them every ``USAGE_LIMITS_TTL_SECONDS``.
"""

from django.db import migrations

from clusters.postgres_only import PostgreSQLOnly

TABLES = ("governance_limit", "accounts_team", "accounts_team_members")


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0002_partition_ledger_by_month"),
        ("inference_gateway", "0002_catalog_notices"),
        ("accounts", "0005_sso"),
    ]

    operations = [
        PostgreSQLOnly(
            sql=[
                f"""CREATE TRIGGER inference_gateway_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table}
                     FOR EACH STATEMENT EXECUTE FUNCTION inference_gateway_notify()"""
                for table in TABLES
            ],
            reverse_sql=[f"DROP TRIGGER IF EXISTS inference_gateway_notify ON {table}" for table in TABLES],
        )
    ]
