"""Cluster credentials are encrypted at rest: the raw columns (what a dump holds) never show them,
existing rows are encrypted by the migration, and keys rotate with ``reencrypt_credentials``."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import override_settings

from clusters.management.commands.reencrypt_credentials import encrypted_columns
from clusters.models import Cluster

SECRETS = ("bearer_token", "prometheus_auth_header")


def raw_row(pk: int) -> str:
    """Every column of the row as the database stores it, joined: what a dump would show."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {connection.ops.quote_name(Cluster._meta.db_table)} WHERE id = %s", [pk])
        return " ".join(str(value) for value in cursor.fetchone())


@contextmanager
def encryption_keys(*keys: str) -> Iterator[None]:
    """Run with FIELD_ENCRYPTION_KEYS = keys (the fields cache their derived keys, so reset them)."""

    def reset() -> None:
        for model, names in encrypted_columns():
            for name in names:
                model._meta.get_field(name).__dict__.pop("keys", None)
                model._meta.get_field(name).__dict__.pop("f", None)

    reset()
    try:
        with override_settings(SALT_KEY=list(keys)):
            yield
    finally:
        reset()


@pytest.mark.django_db
def test_raw_columns_never_hold_the_credentials(cluster) -> None:
    cluster.prometheus_auth_header = "Bearer prom-s3cr3t"
    cluster.save()
    dump = raw_row(cluster.pk)
    assert "s3cr3t-token" not in dump and "prom-s3cr3t" not in dump
    stored = Cluster.objects.get()
    assert (stored.bearer_token, stored.prometheus_auth_header) == ("s3cr3t-token", "Bearer prom-s3cr3t")


@pytest.mark.django_db
def test_keys_rotate_and_a_dropped_key_is_caught_before_anything_is_written(cluster) -> None:
    with encryption_keys("old"):
        cluster.save()
    with encryption_keys("new"), pytest.raises(CommandError, match=r"prod\.bearer_token"):
        call_command("reencrypt_credentials", stdout=io.StringIO())
    with encryption_keys("new", "old"):
        call_command("reencrypt_credentials", stdout=io.StringIO())
    with encryption_keys("new"):
        assert Cluster.objects.get().bearer_token == "s3cr3t-token"


@pytest.mark.django_db(transaction=True)
def test_migrations_encrypt_existing_rows_and_move_url_credentials_out() -> None:
    executor = MigrationExecutor(connection)
    before = [("clusters", "0003_cluster_managed_kinds")]
    executor.migrate(before)
    old = executor.loader.project_state(before).apps.get_model("clusters", "Cluster")
    row = old.objects.create(
        name="legacy",
        auth_method="token",
        server_url="http://10.0.0.1:6443",
        bearer_token="plain-token",
        prometheus_url="https://scott:tiger@prom:9090",
        last_error="GET http://scott:tiger@prom:9090/api failed",
    )
    assert "plain-token" in raw_row(row.pk)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    dump = raw_row(row.pk)
    assert "plain-token" not in dump and "tiger" not in dump and "c2NvdHQ6dGlnZXI" not in dump
    migrated = Cluster.objects.get(pk=row.pk)
    assert migrated.bearer_token == "plain-token"
    assert migrated.prometheus_url == "https://prom:9090"
    assert migrated.prometheus_auth_header == "Basic c2NvdHQ6dGlnZXI="  # scott:tiger
    assert migrated.allow_insecure_http  # it sent its token over http before: kept working, now visible
    assert "tiger" not in migrated.last_error
