"""Cluster credentials encrypted at rest; existing plaintext rows are encrypted in place.

Reading a plaintext value through the encrypted field gives it back as is (it is no Fernet token),
so re-saving each row encrypts it. The reverse writes plaintext back (raw SQL: the field would
encrypt it again) before the columns return to plain text.
"""

import encrypted_fields.fields
from django.db import migrations

SECRETS = ("bearer_token", "prometheus_auth_header")


def encrypt_existing(apps, schema_editor):
    Cluster = apps.get_model("clusters", "Cluster")
    for cluster in Cluster.objects.all():
        cluster.save(update_fields=SECRETS)


def decrypt_existing(apps, schema_editor):
    Cluster = apps.get_model("clusters", "Cluster")
    table = schema_editor.quote_name(Cluster._meta.db_table)
    for cluster in Cluster.objects.all():
        schema_editor.execute(
            f"UPDATE {table} SET bearer_token = %s, prometheus_auth_header = %s WHERE id = %s",
            [cluster.bearer_token or "", cluster.prometheus_auth_header or "", cluster.pk],
        )


class Migration(migrations.Migration):

    dependencies = [
        ('clusters', '0004_cluster_url_safety'),
    ]

    operations = [
        migrations.AlterField(
            model_name='cluster',
            name='bearer_token',
            field=encrypted_fields.fields.EncryptedTextField(blank=True, help_text='Never shown back once saved; encrypted at rest.', null=True),
        ),
        migrations.AlterField(
            model_name='cluster',
            name='prometheus_auth_header',
            field=encrypted_fields.fields.EncryptedTextField(blank=True, help_text="Authorization header for Prometheus, e.g. 'Bearer ...'; never shown; encrypted at rest.", null=True),
        ),
        migrations.RunPython(encrypt_existing, decrypt_existing),
    ]
