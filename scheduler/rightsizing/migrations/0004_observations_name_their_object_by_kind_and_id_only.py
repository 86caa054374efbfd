"""Observations name their object by (kind, object_id) only: the foreign key to InferenceModel goes,
so right-sizing depends on no serving app (the history of an object removed in the portal is
deleted through clusters.services.object_removed, scheduler/rightsizing/kinds.py)."""

from django.db import migrations

FILL = """
UPDATE rightsizing_observation SET kind = 'InferenceModel', object_id = model_id
WHERE model_id IS NOT NULL AND object_id IS NULL
"""


class Migration(migrations.Migration):
    dependencies = [
        ("rightsizing", "0003_observations_of_every_serving_kind"),
    ]

    operations = [
        migrations.RunSQL(FILL, migrations.RunSQL.noop),
        migrations.RemoveIndex(model_name="observation", name="rightsizing_model_i_d47d26_idx"),
        migrations.RemoveField(model_name="observation", name="model"),
    ]
