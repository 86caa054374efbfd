"""GitOps mode (issue 45): how long the portal takes to open a pull request, with the real things:
the tests' control plane and a Gitea (devstack/gitea.py). From a merge to applied, with Flux:
bench/bench_gitops_flux.py (``python -m bench gitops`` runs both).

- ``gitops.pull_request_open_ms`` (target p99 under 1,000): a person's edit saved in git mode
  (``clusters.web.services.save_portal_edit``, the end of every write path) until its pull request
  is open: the row saved and audited, the apply diverted, the commit that makes the branch and the
  file, and the pull request, through Gitea's API (a new object's file is not read first).
  ``EDITS`` new objects, one pull request each; p99 and p50 of the wall time.
  ``gitops.pull_request_open_cpu_ms``: the portal process's own CPU time per pull request,
  ``gitops.pull_request_open_forge_cpu_ms`` Gitea's (its git processes and hooks included): on a
  machine at load 20 the wall time is mostly waiting for a CPU.
- ``gitops.pull_request_open_forge_calls``: the requests the portal sent Gitea per pull request
  (median), counted on its session: what the portal asks of the forge, whatever the forge's speed.
- ``gitops.drift_forge_calls_cold`` and ``gitops.drift_forge_calls``: the requests of a drift round
  (``gitops.drift.check_drift``) over ``DRIFT_OBJECTS`` synced objects whose files Git holds, the
  first round (each file's blob still to read) and the next (no file changed);
  ``gitops.drift_round_ms``: the wall time of that next round (the cluster is not read: drift
  compares Git with the rows, which the watcher keeps).
- ``gitops.portal_writes_to_cluster_in_git_mode``: requests that write (create, update, patch,
  delete) the portal sent the API server while the edits were saved, counted at the fault proxy it
  reaches the cluster through: 0 expected.
- ``gitops.load_1min``: the machine's load when they were taken.
"""

from __future__ import annotations

import os
import statistics

from bench.gitops_stack import drift_rounds, git_mode_stack, open_pull_requests

EDITS = 20
DRIFT_OBJECTS = 50


def run() -> dict[str, float]:
    load_before = os.getloadavg()[0]
    with git_mode_stack(with_flux=False) as stack:
        opened = open_pull_requests(stack, EDITS)
        drift_cold, drift_warm, drift_ms, drifted = drift_rounds(stack, DRIFT_OBJECTS)
    print(f"  pull requests opened: {EDITS}, wall ms {sorted(round(wall) for wall in opened.walls)}")
    if drifted:
        raise RuntimeError(f"{drifted} of the drift benchmark's objects were found drifted: none is")
    ordered = sorted(opened.walls)
    return {
        "gitops.pull_request_open_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
        "gitops.pull_request_open_p50_ms": statistics.median(opened.walls),
        "gitops.pull_request_open_cpu_ms": statistics.median(opened.cpus),
        "gitops.pull_request_open_forge_cpu_ms": statistics.median(opened.forge_cpus),
        "gitops.pull_request_open_forge_calls": statistics.median(opened.forge_calls),
        "gitops.drift_forge_calls_cold": float(drift_cold),
        "gitops.drift_forge_calls": float(drift_warm),
        "gitops.drift_round_ms": drift_ms,
        "gitops.portal_writes_to_cluster_in_git_mode": float(opened.cluster_writes),
        "gitops.load_1min": (load_before + os.getloadavg()[0]) / 2,
    }
