"""Mirror tables leave half of each heap page free, so that updates changing no indexed column
are HOT (see clusters.postgres_only.room_for_updates). PostgreSQL only."""

from django.db import migrations

from clusters.postgres_only import room_for_updates


class Migration(migrations.Migration):

    dependencies = [
        ("models_app", "0008_gpu_count_counts_reported_replicas"),
    ]

    operations = [
        room_for_updates("models_app_inferencemodel", fillfactor=50),
        room_for_updates("models_app_kubeaimodel", fillfactor=50),
        room_for_updates("models_app_modelservice", fillfactor=50),
    ]
