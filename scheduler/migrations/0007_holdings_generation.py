"""The per-cluster generation the holdings cache checks (scheduler.holdings_cache), and the sequence
its values come from; the triggers that move it are installed after each ``migrate``, as the pool
totals' are, since the serving kinds are known only through the registry."""

from django.db import migrations, models

from clusters.postgres_only import PostgreSQLOnly

# Backwards: the functions post_migrate installed on each serving kind's table, with their triggers
# (CASCADE), which would otherwise fail every write once the sequence is gone.
DROP_TRIGGER_FUNCTIONS = r"""
DO $$ DECLARE found record; BEGIN
  FOR found IN SELECT oid::regprocedure AS signature FROM pg_proc WHERE proname LIKE '%\_holdings\_generation' LOOP
    EXECUTE 'DROP FUNCTION ' || found.signature || ' CASCADE';
  END LOOP;
END $$
"""


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0006_pool_totals"),
    ]

    operations = [
        migrations.CreateModel(
            name="HoldingsGeneration",
            fields=[
                (
                    "cluster_id",
                    models.BigIntegerField(
                        help_text="The models' cluster (no foreign key: the row outlives a deleted cluster's models).",
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("generation", models.BigIntegerField()),
            ],
        ),
        PostgreSQLOnly(
            sql="CREATE SEQUENCE scheduler_holdings_generation_seq",
            reverse_sql=[DROP_TRIGGER_FUNCTIONS, "DROP SEQUENCE scheduler_holdings_generation_seq"],
        ),
    ]
