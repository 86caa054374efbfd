"""``manage.py gateway --workers N``: N gateway processes on one port, kept running by a supervisor.

One gateway process is one event loop on one core; the request path is aiohttp's own work on
both sides (inference_gateway/server.py), so more cores need more processes. Each worker is a
whole gateway (``manage.py gateway --workers 1 --reuse-port``): its own catalog with its own
``LISTEN`` connection (a created model is routable in every worker at once), caches and upstream
pool. They all bind the port with ``SO_REUSEPORT``, one listening socket each, and the kernel
spreads new connections over them by hash. That, rather than a pre-fork arbiter like gunicorn's,
because such an arbiter shares one listening socket: whichever worker wakes first takes the
connection, and a client's keep-alive connection stays with it, so the first burst of
connections can pile on one worker.

The supervisor (this module; it never serves) starts the workers, starts a worker again when one
dies (after a second when it died within ``QUICK_EXIT_SECONDS`` of its start, so a worker that
cannot start does not spin), and on SIGINT or SIGTERM passes the signal on, waits up to
``STOP_SECONDS`` for the workers to finish their requests, then kills what is left. Every worker
gets ``PR_SET_PDEATHSIG``: a supervisor killed outright (SIGKILL) takes its workers with it.

Limits: without Redis (``GOVERNANCE_REDIS_URL`` empty) the supervisor names one file in which
every worker counts (``USAGE_LIMITS_SHARED_FILE`` when set, else one in a temporary folder;
governance.limits.SharedCounters), so a team
limit holds for the gateway, not once per worker; each worker says where it counts as it starts.

Metrics: the supervisor gives the workers one ``PROMETHEUS_MULTIPROC_DIR`` (prometheus_client's
multiprocess mode), so any worker's ``/metrics`` answers the sum over all of them, the dead ones'
counts included (``inference_gateway.metrics``).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from django.conf import settings
from prometheus_client import multiprocess

from common.child_processes import die_with_parent

logger = logging.getLogger(__name__)

QUICK_EXIT_SECONDS = 5.0
RESTART_DELAY_SECONDS = 1.0
STOP_SECONDS = 30.0
STOPPING = (signal.SIGINT, signal.SIGTERM)
WATCHED = {*STOPPING, signal.SIGCHLD}


def cores() -> int:
    """The cores this process may run on. In a container these are the node's, not the CPU limit."""
    return len(os.sched_getaffinity(0))


def default_workers() -> int:
    """``GATEWAY_WORKERS`` when set, else one per core (deployments set ``GATEWAY_WORKERS`` or
    ``--workers``: see :func:`cores`)."""
    return settings.GATEWAY_WORKERS or cores()


def _in_worker(mask: set[signal.Signals]) -> None:
    """Run in each worker between fork and exec: the supervisor's signal mask undone, and the
    worker ends when the supervisor does, however it ends."""
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    die_with_parent()


class Supervisor:
    """Keeps ``count`` workers running (``worker_args``: the command line of one) until stopped."""

    def __init__(self, worker_args: list[str], count: int) -> None:
        self.worker_args, self.count = worker_args, count
        self.workers: dict[int, tuple[subprocess.Popen, float]] = {}  # slot -> (process, started at)
        self.metrics_dir = ""
        self.shared_dir = ""  # the workers' shared limit counters, without Redis
        self.mask: set[signal.Signals] = set()

    def _start(self, slot: int) -> None:
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": self.metrics_dir}
        if self.shared_dir:
            env["USAGE_LIMITS_SHARED_FILE"] = str(Path(self.shared_dir) / "limits.sqlite3")
        process = subprocess.Popen(self.worker_args, env=env, preexec_fn=lambda: _in_worker(self.mask))
        self.workers[slot] = (process, time.monotonic())
        logger.info("gateway worker %d started (pid %d)", slot, process.pid)

    def _reap(self) -> list[tuple[int, float]]:
        """The slots whose worker has exited, with how long each ran (its live gauges dropped)."""
        ended = []
        for slot, (process, started) in list(self.workers.items()):
            code = process.poll()
            if code is None:
                continue
            multiprocess.mark_process_dead(process.pid, self.metrics_dir)
            del self.workers[slot]
            ran = time.monotonic() - started
            logger.info("gateway worker %d (pid %d) exited with %s after %.1f s", slot, process.pid, code, ran)
            ended.append((slot, ran))
        return ended

    def run(self) -> int:
        """Serve until SIGINT or SIGTERM; the exit status (0 once every worker has stopped)."""
        self.metrics_dir = tempfile.mkdtemp(prefix="gateway-metrics-")
        if settings.USAGE_LIMITS and not settings.GOVERNANCE_REDIS_URL and not settings.USAGE_LIMITS_SHARED_FILE:
            self.shared_dir = tempfile.mkdtemp(prefix="gateway-limits-")
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
        try:
            for slot in range(self.count):
                self._start(slot)
            return self._stop(self._supervise())
        finally:
            for process, _ in self.workers.values():  # left only when the supervisor itself failed
                process.kill()
                process.wait()
            signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
            shutil.rmtree(self.metrics_dir, ignore_errors=True)
            if self.shared_dir:
                shutil.rmtree(self.shared_dir, ignore_errors=True)

    def _supervise(self) -> signal.Signals:
        """Start a worker again for each one that dies, until a stop signal arrives: that signal."""
        while True:
            info = signal.sigwaitinfo(WATCHED)
            if info.si_signo in STOPPING:
                return signal.Signals(info.si_signo)
            for slot, ran in self._reap():
                logger.warning("gateway worker %d died; starting another", slot)
                if ran < QUICK_EXIT_SECONDS:  # it may not be able to start at all: no tight loop
                    info = signal.sigtimedwait(STOPPING, RESTART_DELAY_SECONDS)
                    if info is not None:
                        return signal.Signals(info.si_signo)
                self._start(slot)

    def _stop(self, received: signal.Signals) -> int:
        """Pass ``received`` on, give the workers ``STOP_SECONDS`` to finish (a second stop signal
        cuts that short), then kill the rest."""
        logger.info("gateway stopping on %s", received.name)
        for process, _ in self.workers.values():
            process.send_signal(received)
        deadline = time.monotonic() + STOP_SECONDS
        while self.workers:
            info = signal.sigtimedwait(WATCHED, max(0.0, deadline - time.monotonic()))
            self._reap()
            if info is None or info.si_signo in STOPPING:
                break
        for slot, (process, _) in list(self.workers.items()):
            logger.warning("gateway worker %d (pid %d) did not stop in time: killed", slot, process.pid)
            process.kill()
            process.wait()
            del self.workers[slot]
        return 0


def supervise(count: int, host: str, port: int) -> int:
    """Run ``count`` workers of ``manage.py gateway`` on ``host:port`` (see the module's docstring)."""
    manage = Path(settings.BASE_DIR) / "manage.py"
    worker = [
        sys.executable,
        str(manage),
        "gateway",
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        "1",
        "--reuse-port",
    ]
    return Supervisor(worker, count).run()
