"""``manage.py gateway --workers N``: N gateway processes on one port, kept running by a supervisor.

One gateway process is one event loop on one core; the request path is aiohttp's own work on
both sides (inference_gateway/server.py), so more cores need more processes. Each worker is a
whole gateway: its own catalog with its own ``LISTEN`` connection (a created model is routable in
every worker at once), caches and upstream pool. They all bind the port with ``SO_REUSEPORT``, one
listening socket each, and the kernel spreads new connections over them by hash. That, rather
than a pre-fork arbiter like gunicorn's, because such an arbiter shares one listening socket:
whichever worker wakes first takes the connection, and a client's keep-alive connection stays
with it, so the first burst of connections can pile on one worker.

**Workers are forked from the supervisor, not started afresh.** Python's and Django's start (the
apps, their models and every module the gateway imports) costs a process about 2.4 s of CPU; the
supervisor pays it once and each worker is a ``fork()`` of it (milliseconds), so a start costs one
import instead of one per process, on cores the workers would otherwise compete for, and the
imported code's pages stay shared (frozen out of the collector first: ``common.gc_tuning``). Before
forking, the supervisor holds no database connection, no thread and no event loop (each worker
opens its own); what is per process is made in the worker (its snapshot name, spool, tracing).

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
multiprocess mode, switched on before the fork: ``inference_gateway.metrics.count_in_files``), so
any worker's ``/metrics`` answers the sum over all of them, the dead ones' counts included.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import connections
from prometheus_client import multiprocess

from common.child_processes import die_with_parent
from common.gc_tuning import tune_collector
from inference_gateway.metrics import count_in_files

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


def _exit_status(status: int) -> int | str:
    """A ``waitpid`` status as a log line reads it: the exit code, or the signal that ended it."""
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else f"signal {os.WTERMSIG(status)}"


class Supervisor:
    """Keeps ``count`` workers running (``serve``: one worker's life, run in a forked child; its
    return value is the child's exit status) until stopped."""

    def __init__(self, serve: Callable[[], int], count: int) -> None:
        self.serve, self.count = serve, count
        self.workers: dict[int, tuple[int, float]] = {}  # slot -> (pid, started at)
        self.metrics_dir = ""
        self.shared_dir = ""  # the workers' shared limit counters, without Redis
        self.mask: set[signal.Signals] = set()

    def _start(self, slot: int) -> None:
        pid = os.fork()
        if pid == 0:
            self._be_worker()
        self.workers[slot] = (pid, time.monotonic())
        logger.info("gateway worker %d started (pid %d)", slot, pid)

    def _be_worker(self) -> None:
        """The child's side of the fork: the supervisor's signal mask undone, bound to end with it,
        then one worker's life; never returns into the supervisor's code."""
        code = 1
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
            die_with_parent()
            code = self.serve()
        except BaseException:
            logger.exception("gateway worker (pid %d) failed", os.getpid())
        finally:
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def _reap(self) -> list[tuple[int, float]]:
        """The slots whose worker has exited, with how long each ran (its live gauges dropped)."""
        ended = []
        for slot, (pid, started) in list(self.workers.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == 0:
                continue
            multiprocess.mark_process_dead(pid, self.metrics_dir)
            del self.workers[slot]
            ran = time.monotonic() - started
            logger.info("gateway worker %d (pid %d) exited with %s after %.1f s", slot, pid, _exit_status(status), ran)
            ended.append((slot, ran))
        return ended

    def _prepare_fork(self) -> None:
        """What every worker inherits: the shared metrics folder and limit counters, no database
        connection (each worker opens its own), and the imported heap frozen out of the collector
        (its pages then stay shared: a collection no longer writes to them)."""
        count_in_files(self.metrics_dir)
        if self.shared_dir:
            settings.USAGE_LIMITS_SHARED_FILE = str(Path(self.shared_dir) / "limits.sqlite3")
        connections.close_all()
        tune_collector()

    def run(self) -> int:
        """Serve until SIGINT or SIGTERM; the exit status (0 once every worker has stopped)."""
        self.metrics_dir = tempfile.mkdtemp(prefix="gateway-metrics-")
        if settings.USAGE_LIMITS and not settings.GOVERNANCE_REDIS_URL and not settings.USAGE_LIMITS_SHARED_FILE:
            self.shared_dir = tempfile.mkdtemp(prefix="gateway-limits-")
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
        try:
            self._prepare_fork()
            for slot in range(self.count):
                self._start(slot)
            return self._stop(self._supervise())
        finally:
            for slot, (pid, _) in list(self.workers.items()):  # left only when the supervisor itself failed
                self._kill(slot, pid)
            signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
            shutil.rmtree(self.metrics_dir, ignore_errors=True)
            if self.shared_dir:
                shutil.rmtree(self.shared_dir, ignore_errors=True)

    def _kill(self, slot: int, pid: int) -> None:
        """``pid`` killed and reaped, out of its slot."""
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        del self.workers[slot]

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
        for pid, _ in self.workers.values():
            os.kill(pid, received)
        deadline = time.monotonic() + STOP_SECONDS
        while self.workers:
            info = signal.sigtimedwait(WATCHED, max(0.0, deadline - time.monotonic()))
            self._reap()
            if info is None or info.si_signo in STOPPING:
                break
        for slot, (pid, _) in list(self.workers.items()):
            logger.warning("gateway worker %d (pid %d) did not stop in time: killed", slot, pid)
            self._kill(slot, pid)
        return 0


def supervise(count: int, serve: Callable[[], int]) -> int:
    """Run ``count`` workers, each a fork of this process running ``serve`` (see the module's docstring)."""
    return Supervisor(serve, count).run()
