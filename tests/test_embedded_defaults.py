"""`make run`'s embedded defaults (SQLite, demo data) serve every page: the suite itself runs on
PostgreSQL, so SQL that only PostgreSQL takes (a LIMIT inside a UNION, say) would pass it and
still break the demo a new user starts with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

PAGES = """
/
/models/
/models/?q=nomatch
/models/?node_pool=nonexistent
/runs/
/runs/new/
/configs/
/planning/
/calculator/
/fleet/pods/
/fleet/events/
/audit/
/audit/?who=admin&since=2020-01-01
/models/deploy/?preset=llama-3.1-8b-instruct
/models/what-if/?q=llama&node_pool=gpu-a100
/calculator/?preset=llama-3.1-8b-instruct
/rightsizing/
/account/
/admin/
/api/inferencemodels/
/api/kubeai-models/
/api/modelservices/
/api/inferenceruns/
/api/planning/pools/
/api/planning/presets/
"""


def test_every_page_of_the_demo_serves_on_sqlite(tmp_path: Path) -> None:
    environment = {
        key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")
    }
    environment |= {"DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}", "DEMO_ADMIN_PASSWORD_FILE":
                    str(tmp_path / "password")}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.embedded_pages"], input=PAGES, capture_output=True, text=True,
        cwd=settings.BASE_DIR, env=environment, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    answers = [line.rsplit(" ", 1) for line in done.stdout.splitlines() if line.startswith(("/", "POST"))]
    assert len(answers) >= len(PAGES.split()) + 14  # the pages, the 14 demo objects, the plan
    failed = [(path, code) for path, code in answers if code != "200"]
    assert not failed, failed
