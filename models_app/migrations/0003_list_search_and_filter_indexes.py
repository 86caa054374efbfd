"""Indexes for the catalog and the API lists at 100,000 models (PostgreSQL only; see clusters.postgres_only)."""

from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations

from clusters.postgres_only import distinct_choice_indexes, search_and_list_indexes


class Migration(migrations.Migration):
    dependencies = [
        ("models_app", "0002_projected_columns_hold_what_the_crd_allows"),
    ]

    operations = [
        TrigramExtension(),
        search_and_list_indexes(
            "models_app_inferencemodel", ["name", "namespace", "model_name", "engine"], ["model_name", "node_pool"]
        ),
        search_and_list_indexes(
            "models_app_kubeaimodel", ["name", "namespace", "model_name", "engine", "url"], ["model_name", "node_pool"]
        ),
        search_and_list_indexes(
            "models_app_modelservice", ["name", "namespace", "model_name", "engine"], ["model_name", "node_pool"]
        ),
        *(
            distinct_choice_indexes(table, "node_pool")
            for table in ("models_app_inferencemodel", "models_app_kubeaimodel", "models_app_modelservice")
        ),
    ]
