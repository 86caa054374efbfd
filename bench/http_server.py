"""The portal's web process as the deploy runs it, started on a free local port.

The command is read from ``platform/deploy/web.yaml`` (the Helm chart renders the same one,
tests/deploy/test_helm.py), only ``--bind`` swapped for a loopback port, so an HTTP benchmark or
test measures the production server configuration (``config/web_server.py``), not a development
server. Another ``command`` (e.g. gunicorn with another worker model, :data:`ALTERNATIVES`) may be
started instead to compare server models on the same machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import yaml

from devstack.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 60.0
# throw-away keys (production settings refuse to start without keys); sign sessions with SECRET_KEY to sign in
SECRET_KEY = "bench-only-secret-key-0123456789abcdef"


def deploy_web_command() -> list[str]:
    """The web container's command in the kustomize base (platform/deploy/web.yaml)."""
    for document in yaml.safe_load_all((ROOT / "platform/deploy/web.yaml").read_text()):
        if document and document.get("kind") == "Deployment":
            return list(document["spec"]["template"]["spec"]["containers"][0]["command"])
    raise LookupError("platform/deploy/web.yaml has no Deployment")


# Server models the deploy's is compared with (bench/bench_http.py, tests/deploy/test_slow_clients.py), each
# reached directly, without the deploy's nginx: gunicorn with the deploy's settings (config/gunicorn.py) but
# another worker class, and the former deploy, granian (3 workers x 8 threads, its header read deadline).
GUNICORN = ["gunicorn", "-c", "python:config.gunicorn", "--workers", "3", "--worker-class"]
ALTERNATIVES: dict[str, list[str]] = {
    "gunicorn_sync": [*GUNICORN, "sync", "config.wsgi:application"],
    "gunicorn_gthread": [*GUNICORN, "gthread", "--threads", "8", "config.wsgi:application"],
    "granian": ["granian", "--interface", "wsgi", "--http", "1", "--workers", "3", "--blocking-threads", "8",
                "--http1-header-read-timeout", "10000", "config.wsgi:application"],
}  # fmt: skip


def _with_bind(command: list[str], bind: str) -> list[str]:
    """``command`` listening on ``bind`` (``host:port``), its program from this Python's environment."""
    words = list(command)
    if words[0] == "granian":
        host, _, port = bind.rpartition(":")
        words += ["--host", host, "--port", port]
    else:
        if "--bind" in words:
            index = words.index("--bind")
            del words[index : index + 2]
        words += ["--bind", bind]
    return [str(Path(sys.executable).with_name(words[0])), *words[1:]]


class Server(NamedTuple):
    url: str  # the base URL, http://127.0.0.1:PORT
    pid: int  # the server's first process (a master's workers are below it)


@contextmanager
def production_server(env: dict[str, str], command: list[str] | None = None) -> Iterator[Server]:
    """Run the deploy's web command (or ``command``) with production settings; yield its base URL
    and process once a gunicorn worker answers /readyz (ready or not: nginx answers /healthz alone).

    ``env`` adds to this process's environment (DATABASE_URL, ...); throw-away keys are set here as
    production settings refuse to start without them.
    """
    port = free_port()
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "SECRET_KEY": SECRET_KEY,
        "FIELD_ENCRYPTION_KEYS": "bench-only-field-key",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "false",
        **env,
    }
    command = _with_bind(command or deploy_web_command(), f"127.0.0.1:{port}")
    process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{command} exited with {process.returncode}")
            try:
                with urllib.request.urlopen(f"{url}/readyz", timeout=2):
                    break
            except urllib.error.HTTPError as error:
                if error.code == 503:  # a worker answered: something the portal needs is missing
                    break
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield Server(url, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
