"""Clients of the forges' REST APIs: Gitea (and Forgejo) and GitHub share the shape of everything
the portal needs (contents, pull requests); only making a branch and creating a file differ (Gitea
makes a branch with the commit that starts it; GitHub needs the branch made first).

Per pull request the portal makes as few calls as the forge allows (docs/gitops.md counts them), each
on a kept-alive connection: one ``requests.Session`` per thread, forge address and token
(``_session``), so a TLS handshake is paid once per worker, not once per proposal.

Errors come out as the Kubernetes client's (``clusters.kube.client``): ``TransientError`` for what
is worth retrying (429, 5xx, timeouts, connection errors), ``PermanentError`` for the rest, with the
forge's own message. The token is sent in the Authorization header only; it is never part of a
URL, a message or a log line (``requests`` logs no headers).
"""

from __future__ import annotations

import base64
import hashlib
import threading
from collections import OrderedDict
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
# Entries of a git tree asked for per page (Gitea pages a recursive tree, at most 1,000 a page;
# GitHub answers it whole, up to its own limit, and ignores the page).
TREE_PAGE = 1000
# Blob texts kept by sha (``Forge.blob_text``): a blob never changes, so the drift check reads a
# file's text once, then only when its sha in the tree changes. Bounded: manifests of a few KiB.
BLOB_CACHE_SIZE = 4096

_local = threading.local()
_blobs: OrderedDict[str, str] = OrderedDict()
_blobs_lock = threading.Lock()


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
        self.session = _session(self.api, mode.token or "")

    @staticmethod
    def _api_base(base: str) -> str:
        return f"{base}/api/v1"

    def _url(self, tail: str) -> str:
        return f"{self.api}/repos/{quote(self.owner)}/{quote(self.name)}/{tail}"

    # Gitea makes a new branch in the request of the commit that starts it (``new_branch``), so a
    # refused commit leaves nothing behind in the forge.
    commits_make_branches = True

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

    def files_under(self, folder: str, branch: str) -> dict[str, str]:
        """Every file below ``folder`` ('' the whole branch) of ``branch``, path to blob sha: the
        folder's tree found in its parent's listing, then read whole (``recursive``) in one call a
        page; {} when the folder does not exist."""
        tree = branch
        if folder:
            parent, _, leaf = folder.rpartition("/")
            try:
                listed = self._call("GET", f"contents/{quote(parent)}" if parent else "contents",
                                    params={"ref": branch})  # fmt: skip
            except NotFoundError:
                return {}
            if not isinstance(listed, list):  # the parent is a file: no folder below it
                return {}
            found = [entry for entry in listed if entry.get("name") == leaf and entry.get("type") == "dir"]
            if not found:
                return {}
            tree = found[0]["sha"]
        files: dict[str, str] = {}
        page = 1
        while True:
            answer = self._call("GET", f"git/trees/{quote(tree, safe='')}",
                                params={"recursive": 1, "page": page, "per_page": TREE_PAGE})  # fmt: skip
            for entry in answer.get("tree") or []:
                if entry.get("type") == "blob":
                    files[f"{folder}/{entry['path']}" if folder else entry["path"]] = entry["sha"]
            if not answer.get("truncated"):
                return files
            if answer.get("page") != page:  # GitHub cuts a tree over its limit rather than paging it
                raise PermanentError(f"the tree of {folder or branch!r} in {branch} is too large to read whole", 413)
            page += 1

    def blob_text(self, sha: str) -> str:
        """The text of the blob ``sha`` (kept: a blob never changes)."""
        with _blobs_lock:
            if sha in _blobs:
                _blobs.move_to_end(sha)
                return _blobs[sha]
        found = self._call("GET", f"git/blobs/{quote(sha)}")
        text = base64.b64decode(found.get("content") or "").decode()
        with _blobs_lock:
            _blobs[sha] = text
            while len(_blobs) > BLOB_CACHE_SIZE:
                _blobs.popitem(last=False)
        return text

    def write_file(self, path: str, branch: str, text: str, sha: str | None, message: str,
                   start_from: str | None = None) -> None:
        """Create (``sha`` None) or update the file in ``branch``, one commit; with ``start_from``,
        ``branch`` is made from that branch by the same request (one round trip less). A file that
        is not the ``sha`` said (or exists, to a create) is refused by the forge: ``PermanentError``
        409 or 422 (``REFUSED_AS_STALE``)."""
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

    # A commit's request cannot make its branch: the ref is made first, and stays if the commit is refused.
    commits_make_branches = False

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


# What the forges answer to a write whose file is not what the request said it was (Gitea: 422 for
# a create of a file that exists and for a sha that does not match; GitHub: 409 and 422).
REFUSED_AS_STALE = (409, 422)


def _session(api: str, token: str) -> requests.Session:
    """This thread's session for the forge at ``api`` with ``token``: its connections are kept
    alive between proposals. Keyed by the token's hash, so a rotated token gets a session of its own
    and the token is kept nowhere but in the session's header."""
    sessions: dict[tuple[str, str], requests.Session] = _local.__dict__.setdefault("sessions", {})
    key = (api, hashlib.sha256(token.encode()).hexdigest())
    session = sessions.get(key)
    if session is None:
        session = sessions[key] = requests.Session()
        session.headers["Authorization"] = f"token {token}"
        session.headers["Accept"] = "application/json"
    return session


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
