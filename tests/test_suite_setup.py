"""How the suite sets itself up for a parallel run (tests/conftest.py): the order it hands its tests out
in (pytest-xdist sends tests to its workers in collection order, so where a minutes-long test sits
decides whether a run ends with one worker busy and the others idle), and each process's database,
copied from the migrated template (tests/support/database.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

from tests.support.database import TEMPLATE_PREFIX, migrations_digest


def test_long_tests_come_first_and_fixture_markers_are_there_before_selection() -> None:
    """The journey (``long``, named last) is collected first; ``-m realcluster`` still selects the
    tests that carry the marker only through their fixtures (the marker is added before ``-m``
    reads it), in their own order after it."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_XDIST")}
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "-m", "realcluster", "tests/test_charts.py", "tests/devstack/test_gitops_stack.py",
         "tests/devstack/test_journey.py"],
        cwd=settings.BASE_DIR, env=environment, capture_output=True, text=True, timeout=300)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    tests = [line for line in collected.stdout.splitlines() if "::" in line]
    assert tests == [
        "tests/devstack/test_journey.py::test_a_team_walks_the_whole_journey",
        "tests/devstack/test_gitops_stack.py::test_a_merged_pull_request_reaches_the_cluster_and_an_open_one_does_not",
        "tests/devstack/test_gitops_stack.py::test_make_run_gitops_applies_the_demo_repository_to_the_demo_cluster",
    ], collected.stdout


@pytest.mark.django_db
def test_the_database_is_copied_from_the_template_of_these_migrations_and_has_all_of_them() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("templates are PostgreSQL's; SQLite's test database is migrated as it is made")
    assert connection.settings_dict["TEST"]["TEMPLATE"] == f"{TEMPLATE_PREFIX}{migrations_digest()}"
    assert set(MigrationRecorder(connection).applied_migrations()) == set(MigrationLoader(connection).graph.nodes)
