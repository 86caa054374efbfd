"""Run every benchmark module against a throwaway test database; print a table, write results.json.

Usage: ``python -m bench [name-filter]``. Uses ``DATABASE_URL`` like the portal (PostgreSQL for
figures that matter; SQLite works for a quick look).
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import sys
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment, teardown_test_environment  # noqa: E402

RESULTS = Path(__file__).with_name("results.json")


def main(argv: list[str]) -> int:
    wanted = argv[0] if argv else ""
    names = [info.name for info in pkgutil.iter_modules([str(Path(__file__).parent)]) if info.name.startswith("bench_")]
    # `python -m bench gateway` runs bench_gateway alone; a part of a name runs every module it is in
    modules = [f"bench_{wanted}"] if f"bench_{wanted}" in names else [name for name in names if wanted in name]
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    results: dict[str, float] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    try:
        for name in modules:
            # each benchmark starts from an empty database (sequences reset): one module's rows
            # must neither collide with the next one's nor weigh on its figures
            call_command("flush", interactive=False, verbosity=0)
            figures = importlib.import_module(f"bench.{name}").run()
            for key, value in figures.items():
                print(f"{key:<45} {value:>14,.2f}")
            results.update(figures)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        teardown_test_environment()
    RESULTS.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
