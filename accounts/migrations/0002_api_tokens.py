"""Hashed, named, expiring API tokens (django-rest-knox); DRF's plaintext tokens become hashed ones.

Each existing ``authtoken_token`` key keeps working (its SHA-512 digest is stored as knox stores
its own, named "migrated", expiring after API_TOKEN_DAYS) and the plaintext rows are deleted, so
no dump shows them again. The reverse keeps the tokens hashed: their keys cannot be recovered.
"""

from datetime import timedelta

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.utils import timezone
from knox.crypto import hash_token

DRF_TOKEN_TABLE = "authtoken_token"


def hash_drf_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if DRF_TOKEN_TABLE not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("accounts", "ApiToken")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, user_id FROM {DRF_TOKEN_TABLE}")
        rows = cursor.fetchall()
        expiry = timezone.now() + timedelta(days=settings.API_TOKEN_DAYS)
        ApiToken.objects.bulk_create(
            ApiToken(digest=hash_token(key), token_key=key[:15], user_id=user_id, name="migrated", expiry=expiry)
            for key, user_id in rows
        )
        cursor.execute(f"DELETE FROM {DRF_TOKEN_TABLE}")


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ApiToken',
            fields=[
                ('digest', models.CharField(max_length=128, primary_key=True, serialize=False)),
                ('token_key', models.CharField(db_index=True, max_length=25)),
                ('created', models.DateTimeField(auto_now_add=True)),
                ('expiry', models.DateTimeField(blank=True, null=True)),
                ('name', models.CharField(help_text="What uses this token, e.g. 'ci' or 'laptop'.", max_length=64)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='auth_token_set', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created'],
            },
        ),
        migrations.RunPython(hash_drf_tokens, migrations.RunPython.noop),
    ]
