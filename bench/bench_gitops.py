"""GitOps mode (issue 45): how long the portal takes to open a pull request, with the real things:
the tests' control plane and a Gitea (devstack/gitea.py). From a merge to applied, with Flux:
bench/bench_gitops_flux.py (``python -m bench gitops`` runs both).

- ``gitops.pull_request_open_ms`` (target p99 under 1,000): a person's edit saved in git mode
  (``clusters.web.services.save_portal_edit``, the end of every write path) until its pull request
  is open: the row saved and audited, the apply diverted, the file read on ``main``, a branch, a
  commit and the pull request made through Gitea's API. ``EDITS`` new objects, one pull request
  each; p99 and p50 of the wall time. ``gitops.pull_request_open_cpu_ms``: the portal process's own
  CPU time per pull request, ``gitops.pull_request_open_forge_cpu_ms`` Gitea's (its git processes
  included): on a machine at load 20 the wall time is mostly waiting for a CPU.
- ``gitops.portal_writes_to_cluster_in_git_mode``: requests that write (create, update, patch,
  delete) the portal sent the API server while the edits were saved, counted at the fault proxy it
  reaches the cluster through: 0 expected.
- ``gitops.load_1min``: the machine's load when they were taken.
"""

from __future__ import annotations

import os
import statistics

from bench.gitops_stack import git_mode_stack, open_pull_requests

EDITS = 20


def run() -> dict[str, float]:
    load_before = os.getloadavg()[0]
    with git_mode_stack(with_flux=False) as stack:
        walls, cpus, forge_cpus, writes = open_pull_requests(stack, EDITS)
    print(f"  pull requests opened: {EDITS}, wall ms {sorted(round(wall) for wall in walls)}")
    ordered = sorted(walls)
    return {
        "gitops.pull_request_open_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
        "gitops.pull_request_open_p50_ms": statistics.median(walls),
        "gitops.pull_request_open_cpu_ms": statistics.median(cpus),
        "gitops.pull_request_open_forge_cpu_ms": statistics.median(forge_cpus),
        "gitops.portal_writes_to_cluster_in_git_mode": float(writes),
        "gitops.load_1min": (load_before + os.getloadavg()[0]) / 2,
    }
