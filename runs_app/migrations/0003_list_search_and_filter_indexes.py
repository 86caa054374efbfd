"""Indexes for the run and config lists at scale (PostgreSQL only; see clusters.postgres_only)."""

from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations, models

from clusters.postgres_only import search_and_list_indexes


class Migration(migrations.Migration):
    dependencies = [
        ("runs_app", "0002_projected_columns_hold_what_the_crd_allows"),
    ]

    operations = [
        TrigramExtension(),
        search_and_list_indexes("runs_app_inferencerun", ["name", "namespace", "config_name"], ["config_name"]),
        search_and_list_indexes(
            "runs_app_inferenceconfig", ["name", "namespace", "model_name", "image"], ["model_name"]
        ),
        # the run list and the dashboard's recent runs: newest first
        migrations.AddIndex(
            model_name="inferencerun",
            index=models.Index(fields=["-created_at"], name="runs_app_run_newest_first"),
        ),
    ]
