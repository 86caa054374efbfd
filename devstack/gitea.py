"""A real Gitea for the GitOps tests and ``make run GITOPS=1`` (issue 45): the forge the portal opens
pull requests on and Flux's source-controller pulls from. Built from the pinned Go module in
``tools/gitea`` (cached by hash, outside the clone) and started on a free loopback port with an
``app.ini`` of its own in a temporary folder: SQLite in that folder, so no database server; no
mailer, no SSH, no registration, no indexer, no cron, Actions or packages (nothing the REST API
needs, each a cost at start on a busy machine). ``INSTALL_LOCK`` skips the web installer.

``Gitea.start()`` migrates the database and creates the admin user with an API token (``gitea
admin user create --access-token``: one CLI call, no password to type into a page), then serves.
``gitea.api`` is a ``requests`` session that sends the token; the helpers below cover what the
tests and the demo do with it (an organisation and a repository, a file committed on a branch, a
pull request opened and merged), each waiting on Gitea's own state, never on time.

Run as root (CI containers), Gitea refuses to start unless told it is wanted
(``GITEA_I_AM_BEING_UNSAFE_RUNNING_AS_ROOT``); it is told so only when the euid is 0.
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from devstack.control_plane import Process, keep_logs, start_process, wait_until
from devstack.go_tools import build_tool
from devstack.ports import free_port, wait_serving

REPO_ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO_ROOT / "tools" / "gitea" / "build.sh"
ADMIN_USER = "portal-admin"
DEFAULT_BRANCH = "main"
# Bounds a step that never completes (a pull request Gitea never finds mergeable); a step takes
# well under a second on a quiet machine and seconds at load 20.
STEP_BOUND_SECONDS = 120.0


class GiteaUnavailable(Exception):
    """No Go toolchain to build Gitea with: the reason says how to get one."""


def build_binary(say: Callable[[str], None] | None = None) -> Path:
    """Gitea's binary (``tools/gitea/build.sh``, cached by hash), its templates and locales beside it."""
    return build_tool(BUILD_SCRIPT, "Gitea", GiteaUnavailable, say).path


def _app_ini(workdir: Path, port: int, static_root: Path) -> str:
    """The configuration: everything under ``workdir``, only what the REST API and git over HTTP need."""
    sections: dict[str, dict[str, Any]] = {
        "": {"APP_NAME": "Inference Portal GitOps", "RUN_MODE": "prod", "WORK_PATH": workdir},
        "server": {"PROTOCOL": "http", "HTTP_ADDR": "127.0.0.1", "HTTP_PORT": port,
                   "ROOT_URL": f"http://127.0.0.1:{port}/", "DISABLE_SSH": "true", "START_SSH_SERVER": "false",
                   "OFFLINE_MODE": "true", "LFS_START_SERVER": "false", "STATIC_ROOT_PATH": static_root,
                   "APP_DATA_PATH": workdir / "data"},
        "database": {"DB_TYPE": "sqlite3", "PATH": workdir / "gitea.db", "SQLITE_JOURNAL_MODE": "WAL"},
        "repository": {"ROOT": workdir / "repositories", "DEFAULT_BRANCH": DEFAULT_BRANCH},
        "security": {"INSTALL_LOCK": "true", "SECRET_KEY": secrets.token_hex(32),
                     "INTERNAL_TOKEN": secrets.token_urlsafe(64)},
        "oauth2": {"ENABLED": "false"},
        "mailer": {"ENABLED": "false"},
        "service": {"DISABLE_REGISTRATION": "true", "REQUIRE_SIGNIN_VIEW": "true",
                    "DEFAULT_KEEP_EMAIL_PRIVATE": "true"},
        "indexer": {"ISSUE_INDEXER_TYPE": "db", "REPO_INDEXER_ENABLED": "false"},
        "session": {"PROVIDER": "memory"},
        "cache": {"ADAPTER": "memory"},
        "cron": {"ENABLED": "false"},
        "actions": {"ENABLED": "false"},
        "packages": {"ENABLED": "false"},
        # the portal that follows pull requests listens on loopback: Gitea's default refuses it
        "webhook": {"ALLOWED_HOST_LIST": "loopback,private,external"},
        "log": {"MODE": "console", "LEVEL": "Warn", "ROOT_PATH": workdir / "log"},
    }
    lines = []
    for section, keys in sections.items():
        if section:
            lines.append(f"[{section}]")
        lines.extend(f"{key} = {value}" for key, value in keys.items())
        lines.append("")
    return "\n".join(lines)


@dataclass
class Gitea:
    """A running Gitea: ``url`` its root, ``token`` the admin's API token (all scopes)."""

    workdir: Path
    binary: Path
    port: int = 0
    token: str = ""
    admin_password: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    process: Process | None = None
    api: requests.Session = field(default_factory=requests.Session)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def clone_url(self, owner: str, repo: str) -> str:
        """The repository over HTTP, as Flux's GitRepository ``spec.url`` takes it."""
        return f"{self.url}/{owner}/{repo}.git"

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> Gitea:
        """Write app.ini, migrate, create the admin and its token, serve; returns once the API answers."""
        self.port = self.port or free_port()
        config = self.workdir / "app.ini"
        config.write_text(_app_ini(self.workdir, self.port, self.binary.parent))
        self._cli("migrate")
        created = self._cli("admin", "user", "create", "--admin", "--username", ADMIN_USER,
                            "--password", self.admin_password, "--email", f"{ADMIN_USER}@example.com",
                            "--must-change-password=false", "--access-token", "--access-token-name", "portal")
        self.token = created.split("Access token was successfully created... ", 1)[1].split()[0]
        self.api.headers["Authorization"] = f"token {self.token}"
        self.process = start_process("gitea", [str(self.binary), "--config", str(config), "web"], self.workdir,
                                     env=self._environment())
        try:
            wait_serving(f"{self.url}/api/healthz", "gitea", self.process.popen, timeout=STEP_BOUND_SECONDS)
        except RuntimeError as error:
            raise RuntimeError(f"{error}\n{self.process.tail()}") from None
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None
        self.api.close()

    def _environment(self) -> dict[str, str]:
        environment = {**os.environ, "GITEA_WORK_DIR": str(self.workdir), "HOME": str(self.workdir)}
        if os.geteuid() == 0:
            environment["GITEA_I_AM_BEING_UNSAFE_RUNNING_AS_ROOT"] = "true"
        return environment

    def _cli(self, *args: str) -> str:
        done = subprocess.run([str(self.binary), "--config", str(self.workdir / "app.ini"), *args],
                              capture_output=True, text=True, cwd=self.workdir, env=self._environment(),
                              timeout=STEP_BOUND_SECONDS, check=False)
        if done.returncode:
            raise RuntimeError(f"gitea {' '.join(args[:3])} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        return done.stdout

    # -- the REST API ------------------------------------------------------------------------------
    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """``/api/v1<path>`` as the admin; its JSON (None when empty). A refusal raises with Gitea's message."""
        reply = self.api.request(method, f"{self.url}/api/v1{path}", timeout=30, **kwargs)
        if not reply.ok:
            raise requests.HTTPError(f"gitea {method} {path}: {reply.status_code} {reply.text[:500]}", response=reply)
        return reply.json() if reply.content else None

    def create_repository(self, owner: str, name: str) -> dict:
        """An organisation ``owner`` (made if missing) and its repository ``name``, initialised with a
        README on ``main`` so that branches and pull requests have a base."""
        if self.api.get(f"{self.url}/api/v1/orgs/{owner}", timeout=30).status_code == 404:
            self.call("POST", "/orgs", json={"username": owner, "visibility": "private"})
        return self.call("POST", f"/orgs/{owner}/repos", json={
            "name": name, "private": True, "auto_init": True, "readme": "Default",
            "default_branch": DEFAULT_BRANCH})

    def put_file(self, owner: str, repo: str, path: str, content: str, message: str,
                 branch: str = DEFAULT_BRANCH, new_branch: str | None = None) -> dict:
        """Commit ``content`` at ``path`` (created or replaced) on ``branch``, or on ``new_branch``
        started from it; Gitea's answer (``commit.sha``)."""
        contents = f"/repos/{owner}/{repo}/contents/{path}"
        existing = self.api.get(f"{self.url}/api/v1{contents}", params={"ref": branch}, timeout=30)
        body: dict[str, Any] = {"content": base64.b64encode(content.encode()).decode(), "message": message,
                                "branch": branch}
        if new_branch:
            body["new_branch"] = new_branch
        if existing.ok:
            return self.call("PUT", contents, json={**body, "sha": existing.json()["sha"]})
        return self.call("POST", contents, json=body)

    def open_pull_request(self, owner: str, repo: str, head: str, title: str, base: str = DEFAULT_BRANCH) -> dict:
        return self.call("POST", f"/repos/{owner}/{repo}/pulls", json={"head": head, "base": base, "title": title})

    def merge_pull_request(self, owner: str, repo: str, number: int) -> str:
        """Merge once Gitea has checked the pull request (it does so in the background after it opens:
        a merge before that is refused); the merge commit's sha."""
        path = f"/repos/{owner}/{repo}/pulls/{number}"
        self.wait_for(lambda: self.call("GET", path)["mergeable"], f"pull request #{number} to be mergeable")
        self.call("POST", f"{path}/merge", json={"Do": "merge", "delete_branch_after_merge": True})
        return self.call("GET", path)["merge_commit_sha"]

    def wait_for(self, condition: Callable[[], Any], what: str) -> Any:
        """Until ``condition()`` is truthy (its value), while Gitea runs."""
        return wait_until(condition, what, self.check_alive, STEP_BOUND_SECONDS)

    def check_alive(self) -> None:
        if self.process is not None and not self.process.alive():
            raise RuntimeError(f"gitea exited:\n{self.process.tail()}")


@contextmanager
def running_gitea(binary: Path | None = None) -> Iterator[Gitea]:
    """Build (when needed), start, yield, stop; the folder goes with it, its logs are kept in
    test-artifacts/gitea/ when the block fails."""
    workdir = Path(tempfile.mkdtemp(prefix="gitea-"))
    gitea = Gitea(workdir=workdir, binary=binary or build_binary())
    try:
        yield gitea.start()
    except Exception:
        keep_logs(workdir, "gitea", "repositories", "data")
        raise
    finally:
        gitea.stop()
        shutil.rmtree(workdir, ignore_errors=True)
