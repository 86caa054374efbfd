"""The order the suite hands its tests out in (tests/conftest.py's ``pytest_collection_modifyitems``):
pytest-xdist sends tests to its workers in collection order, so where a minutes-long test sits
decides whether a parallel run ends with one worker busy and the others idle."""

from __future__ import annotations

import os
import subprocess
import sys

from django.conf import settings


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
