"""CPU requests the way KRR and Goldilocks recommend them.

KRR's default ("simple") strategy sets the CPU request to the 95th percentile of the pod's CPU
usage over the window and no CPU limit; Goldilocks shows the VPA recommender's target, the 90th
percentile of usage with a 15% safety margin. Both land near p95 for serving pods (steady load with
bursts), and p95 needs no margin to reason about, so the request recommended here is the p95 of
the largest pod's CPU usage (cAdvisor's ``container_cpu_usage_seconds_total``, as a 5-minute rate)
rounded up to 10 millicores, never below 10m. CPU is compressible: a pod above its request is
throttled, not killed, so the percentile (not the maximum, as for memory) is the right figure. A
change under 10% of the request is not worth a restart.
"""

from __future__ import annotations

from dataclasses import dataclass

STEP_MILLICORES = 10
MIN_CHANGE_PERCENT = 10


@dataclass(frozen=True)
class CPUVerdict:
    recommended_millicores: int | None  # None: keep the request
    recommendation: str


def format_cpu(millicores: int) -> str:
    """A CPU quantity as Kubernetes writes it: whole cores as ``4``, the rest as ``1250m``."""
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


def cpu_verdict(request_millicores: int | None, p95_millicores: int | None, window: str) -> CPUVerdict:
    if p95_millicores is None:
        return CPUVerdict(None, "")
    target = max(STEP_MILLICORES, -(-p95_millicores // STEP_MILLICORES) * STEP_MILLICORES)
    usage = f"p95 of CPU usage over {window} is {format_cpu(target)}"
    if not request_millicores:
        return CPUVerdict(target, f"Set a CPU request of {format_cpu(target)} ({usage}, as KRR recommends)")
    if abs(target - request_millicores) * 100 < MIN_CHANGE_PERCENT * request_millicores:
        return CPUVerdict(None, f"CPU request {format_cpu(request_millicores)} fits ({usage})")
    verb = "reducing" if target < request_millicores else "increasing"
    return CPUVerdict(
        target,
        f"Consider {verb} the CPU request from {format_cpu(request_millicores)} to {format_cpu(target)} ({usage})",
    )
