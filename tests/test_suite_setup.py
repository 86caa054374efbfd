"""How the suite sets itself up for a parallel run: each process's database, copied from the migrated
template (tests/support/database.py)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

from tests.support.database import TEMPLATE_PREFIX, migrations_digest


@pytest.mark.django_db
def test_the_database_is_copied_from_the_template_of_these_migrations_and_has_all_of_them() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("templates are PostgreSQL's; SQLite's test database is migrated as it is made")
    assert connection.settings_dict["TEST"]["TEMPLATE"] == f"{TEMPLATE_PREFIX}{migrations_digest()}"
    assert set(MigrationRecorder(connection).applied_migrations()) == set(MigrationLoader(connection).graph.nodes)
