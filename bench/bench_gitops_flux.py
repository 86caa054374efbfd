"""GitOps mode (issue 45): from a merge to the portal marking the change applied, with the real
things: the tests' control plane, a Gitea, and Flux's source and kustomize controllers applying the
repository at a 5 s interval (devstack/flux.py).

- ``gitops.merge_to_applied_s`` (target under Flux's interval + 5 s): from Gitea's merge time to the
  poller marking the change applied (the cluster holds the file, the row takes it). The poller
  runs every ``FOLLOW_EVERY_S`` here; in production every ``GITOPS_FOLLOW_SECONDS`` (default 5),
  which adds up to that. Median of ``MERGES`` merges; ``gitops.merge_to_applied_max_s`` the worst.
- ``gitops.flux_load_1min``: the machine's load when they were taken.
"""

from __future__ import annotations

import os
import statistics
import time

from bench.gitops_stack import git_mode_stack, open_pull_requests
from gitops.follow import follow_pull_requests
from gitops.models import ProposedChange

MERGES = 3
FOLLOW_EVERY_S = 0.5
APPLIED_WITHIN_S = 600


def run() -> dict[str, float]:
    load_before = os.getloadavg()[0]
    seconds = []
    with git_mode_stack(with_flux=True) as stack:
        open_pull_requests(stack, MERGES)
        for change in ProposedChange.objects.order_by("id"):
            stack.repo.merge(change.number)
            deadline = time.monotonic() + APPLIED_WITHIN_S
            while not ProposedChange.objects.filter(pk=change.pk, state=ProposedChange.State.APPLIED).exists():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"pull request #{change.number} not applied within {APPLIED_WITHIN_S} s")
                follow_pull_requests()
                time.sleep(FOLLOW_EVERY_S)
            change.refresh_from_db()
            seconds.append((change.finished_at - change.merged_at).total_seconds())
    print(f"  merge to applied s: {[round(s, 1) for s in seconds]}")
    return {
        "gitops.merge_to_applied_s": statistics.median(seconds),
        "gitops.merge_to_applied_max_s": max(seconds),
        "gitops.flux_load_1min": (load_before + os.getloadavg()[0]) / 2,
    }
