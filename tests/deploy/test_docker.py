"""The image and compose file: nothing private goes into the image, the web server (nginx, gunicorn) is installed and
pinned, the image's build step works with production settings, compose probes the web process as Kubernetes does, and
Prometheus sends the /metrics token."""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"


def ignored(path: str) -> bool:
    """Whether .dockerignore keeps ``path`` out of the build context (a pattern matching the path
    or one of its parent folders, as Docker applies them)."""
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()]
    patterns = [pattern for pattern in patterns if pattern and not pattern.startswith("#")]
    parts = path.split("/")
    prefixes = ["/".join(parts[: index + 1]) for index in range(len(parts))]
    return any(fnmatch.fnmatch(prefix, pattern.removeprefix("**/")) for prefix in prefixes for pattern in patterns)


def test_dockerignore_keeps_the_virtualenv_git_and_local_database_out() -> None:
    for private in (".venv/bin/python", ".git/config", "db.sqlite3", "staticfiles/admin/css/base.css",
                    "clusters/__pycache__/models.cpython-311.pyc"):  # fmt: skip
        assert ignored(private), private
    for needed in ("manage.py", "requirements.txt", "config/settings/base.py", "platform/crds", "templates/base.html"):
        assert not ignored(needed), needed


def test_the_web_server_is_pinned_and_the_image_installs_only_the_requirements() -> None:
    assert re.search(r"^gunicorn==\d+\.\d+\.\d+$", (ROOT / "requirements.txt").read_text(), re.M)
    assert "apt-get install -y --no-install-recommends nginx-light" in (DOCKER / "Dockerfile").read_text()
    installs = [line for line in (DOCKER / "Dockerfile").read_text().splitlines() if "pip install" in line]
    assert installs and all(line.split("pip install", 1)[1].split() == ["--no-cache-dir", "-r", "requirements.txt"]
                            for line in installs)  # fmt: skip


def test_the_image_build_step_runs_under_production_settings(tmp_path) -> None:
    """The Dockerfile's collectstatic line, with its own environment, succeeds (production settings
    refuse to start without real keys, so the line must bring build-only ones)."""
    line = next(line for line in (DOCKER / "Dockerfile").read_text().splitlines() if "collectstatic" in line)
    words = shlex.split(line.removeprefix("RUN").split("&&")[0].rstrip(" \\"))
    assignments = dict(word.split("=", 1) for word in words if re.match(r"^[A-Z_]+=", word))
    command = [word for word in words if not re.match(r"^[A-Z_]+=", word)]
    assert command[:2] == ["python", "manage.py"]
    env = {key: value for key, value in os.environ.items() if key not in ("SECRET_KEY", "FIELD_ENCRYPTION_KEYS")}
    env |= {"DJANGO_SETTINGS_MODULE": "config.settings.production", **assignments}
    result = subprocess.run([sys.executable, *command[1:], "--dry-run"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]


def compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def test_compose_probes_web_readiness_and_beat_writes_its_schedule_to_tmp() -> None:
    services = compose()["services"]
    assert "/readyz" in " ".join(services["web"]["healthcheck"]["test"])
    assert services["prometheus"]["depends_on"]["web"]["condition"] == "service_healthy"
    beat = shlex.split(services["beat"]["command"])
    assert beat[beat.index("--schedule") + 1].startswith("/tmp/")


def test_prometheus_in_compose_sends_the_metrics_token() -> None:
    document = compose()
    portal_env = document["x-portal"]["environment"]
    assert portal_env["METRICS_TOKEN"].startswith("${METRICS_TOKEN:?")
    assert document["secrets"]["metrics_token"] == {"environment": "METRICS_TOKEN"}
    assert "metrics_token" in document["services"]["prometheus"]["secrets"]
    scrape = yaml.safe_load((DOCKER / "prometheus.yml").read_text())["scrape_configs"][0]
    assert scrape["authorization"] == {"type": "Bearer", "credentials_file": "/run/secrets/metrics_token"}
