"""Fixtures of the GitOps tests: a change mode in git mode."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

from clusters.models import Cluster
from gitops.models import ChangeMode


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def git_mode(db) -> Callable[..., ChangeMode]:
    """``git_mode(cluster, namespace="", repository_url=...)``: the scope's edits become pull requests."""

    def make(cluster: Cluster, namespace: str = "", repository_url: str | None = None, **fields) -> ChangeMode:
        mode = ChangeMode(
            cluster=cluster, namespace=namespace, mode=ChangeMode.Mode.GIT, forge=ChangeMode.Forge.GITEA,
            repository_url=repository_url or f"http://127.0.0.1:{closed_port()}/platform/clusters",
            allow_insecure_http=True, token="forge-s3cr3t", **fields,
        )  # fmt: skip
        mode.full_clean()
        mode.save()
        return mode

    return make
