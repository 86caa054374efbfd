"""Mirror tables leave half of each heap page free, so that updates changing no indexed column
are HOT (see clusters.postgres_only.room_for_updates). PostgreSQL only."""

from django.db import migrations

from clusters.postgres_only import room_for_updates


class Migration(migrations.Migration):

    dependencies = [
        ("runs_app", "0004_cluster_lookups_use_the_unique_index"),
    ]

    operations = [
        room_for_updates("runs_app_inferenceconfig", fillfactor=50),
        room_for_updates("runs_app_inferencerun", fillfactor=50),
    ]
