"""Clients of the forges' REST APIs: Gitea (and Forgejo) and GitHub share the shape of everything
the portal needs (contents, pull requests); only making a branch and creating a file differ (Gitea
makes a branch with the commit that starts it; GitHub needs the branch made first).

Errors come out as the Kubernetes client's (``clusters.kube.client``): ``TransientError`` for what
is worth retrying (429, 5xx, timeouts, connection errors), ``PermanentError`` for the rest, with the
forge's own message. The token is sent in the Authorization header only; it is never part of a
URL, a message or a log line (``requests`` logs no headers).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

import requests
from django.utils.dateparse import parse_datetime

from clusters.kube.client import NotFoundError, PermanentError, TransientError
from clusters.url_rules import redact_url
from gitops.models import ChangeMode

TIMEOUT_SECONDS = 10


@dataclass(frozen=True)
class FileInGit:
    """A file of a branch: its blob sha and its text."""

    sha: str
    text: str


@dataclass(frozen=True)
class PullRequest:
    number: int
    url: str
    state: str  # "open" or "closed"
    merged: bool
    merge_commit: str
    merged_at: datetime | None


class Forge:
    """One repository on a forge, spoken to with the change mode's token: Gitea's API (GitHub's
    differences in the subclass below)."""

    def __init__(self, mode: ChangeMode) -> None:
        base, self.owner, self.name = mode.repository()
        self.api = self._api_base(base)
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"token {mode.token}"
        self.session.headers["Accept"] = "application/json"

    @staticmethod
    def _api_base(base: str) -> str:
        return f"{base}/api/v1"

    def _url(self, tail: str) -> str:
        return f"{self.api}/repos/{quote(self.owner)}/{quote(self.name)}/{tail}"

    def _call(self, method: str, tail: str, **kwargs: Any) -> Any:
        url = self._url(tail)
        try:
            response = self.session.request(method, url, timeout=TIMEOUT_SECONDS, **kwargs)
        except requests.RequestException as error:
            raise TransientError(f"{method} {redact_url(url)}: {type(error).__name__}") from None
        if response.status_code < 300:
            return response.json() if response.content else None
        where = f"{method} {urlsplit(url).path}"
        message = f"the forge answered {response.status_code} to {where}: {_forge_message(response)}"
        if response.status_code == 404:
            raise NotFoundError(message, 404)
        if response.status_code == 429 or response.status_code >= 500:
            raise TransientError(message, response.status_code)
        raise PermanentError(message, response.status_code)

    def read_file(self, path: str, branch: str) -> FileInGit | None:
        """The file in ``branch``, or None when it does not exist."""
        try:
            found = self._call("GET", f"contents/{quote(path)}", params={"ref": branch})
        except NotFoundError:
            return None
        if not isinstance(found, dict) or found.get("type") != "file":
            raise PermanentError(f"{path} in {branch} is not a file", 409)
        return FileInGit(found["sha"], base64.b64decode(found.get("content") or "").decode())

    def write_file(self, path: str, branch: str, text: str, sha: str | None, message: str,
                   start_from: str | None = None) -> None:
        """Create (``sha`` None) or update the file in ``branch``, one commit; with ``start_from``,
        ``branch`` is made from that branch by the same request (one round trip less)."""
        body = {**self._on(branch, start_from), "message": message,
                "content": base64.b64encode(text.encode()).decode()}  # fmt: skip
        if sha is None:
            self._call("POST", f"contents/{quote(path)}", json=body)
        else:
            self._call("PUT", f"contents/{quote(path)}", json={**body, "sha": sha})

    def delete_file(self, path: str, branch: str, sha: str, message: str, start_from: str | None = None) -> None:
        self._call("DELETE", f"contents/{quote(path)}", json={**self._on(branch, start_from), "message": message,
                                                              "sha": sha})  # fmt: skip

    def _on(self, branch: str, start_from: str | None) -> dict[str, str]:
        """Where a commit goes: Gitea makes a new branch from ``start_from`` in the commit's request."""
        return {"branch": branch} if start_from is None else {"branch": start_from, "new_branch": branch}

    def open_pull_request(self, branch: str, base: str, title: str, body: str) -> PullRequest:
        asked = {"head": branch, "base": base, "title": title, "body": body}
        return _pull_request(self._call("POST", "pulls", json=asked))

    def pull_request(self, number: int) -> PullRequest:
        return _pull_request(self._call("GET", f"pulls/{number}"))


class GitHub(Forge):
    """GitHub (and GitHub Enterprise at ``<host>/api/v3``): a branch is a ref made from a commit,
    and one PUT creates or updates a file."""

    @staticmethod
    def _api_base(base: str) -> str:
        return "https://api.github.com" if urlsplit(base).hostname == "github.com" else f"{base}/api/v3"

    def _create_branch(self, branch: str, base: str) -> None:
        """A branch is a ref made from the base branch's head commit."""
        try:
            head = self._call("GET", f"branches/{quote(base, safe='')}")["commit"]["sha"]
        except NotFoundError:
            raise PermanentError(f"the base branch {base!r} does not exist", 404) from None
        self._call("POST", "git/refs", json={"ref": f"refs/heads/{branch}", "sha": head})

    def write_file(self, path: str, branch: str, text: str, sha: str | None, message: str,
                   start_from: str | None = None) -> None:
        body = {**self._on(branch, start_from), "message": message,
                "content": base64.b64encode(text.encode()).decode()}  # fmt: skip
        self._call("PUT", f"contents/{quote(path)}", json={**body, **({"sha": sha} if sha else {})})

    def _on(self, branch: str, start_from: str | None) -> dict[str, str]:
        """GitHub's contents API commits to an existing branch only: it is made first, from ``start_from``."""
        if start_from is not None:
            self._create_branch(branch, start_from)
        return {"branch": branch}


def forge_for(mode: ChangeMode) -> Forge:
    """The client of the change mode's forge."""
    return GitHub(mode) if mode.forge == ChangeMode.Forge.GITHUB else Forge(mode)


def _pull_request(data: dict[str, Any]) -> PullRequest:
    return PullRequest(
        number=int(data["number"]),
        url=str(data.get("html_url") or ""),
        state=str(data.get("state") or ""),
        merged=bool(data.get("merged")),
        merge_commit=str(data.get("merge_commit_sha") or ""),
        merged_at=parse_datetime(data["merged_at"]) if data.get("merged_at") else None,
    )


def _forge_message(response: requests.Response) -> str:
    """The forge's own words (both send ``{"message": ...}``), clipped."""
    try:
        message = response.json().get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message or response.reason or "")[:300]
