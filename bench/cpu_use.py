"""CPU time other processes spent over a span, read from ``/proc`` (Linux): what a benchmark's server
and database each spent per request, beside the latency its clients saw.

On a machine of 2 cores, 16 closed-loop clients see a latency of about 16 x (CPU a request) / 2
once the cores are busy: the CPU a request costs, and who spends it, is what sets the figure. A
process that exits during the span loses what it spent (the server's workers and the database's
pooled connections live through a measurement); one that starts counts from zero.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
PROC = Path("/proc")
# utime and stime: their places among /proc/PID/stat's fields after the command name
USER, SYSTEM = 11, 12


def _stat(pid: int) -> list[str] | None:
    """The fields after the command name of ``/proc/PID/stat`` (None once the process is gone)."""
    try:
        return (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def _pids() -> list[int]:
    return [int(entry.name) for entry in PROC.iterdir() if entry.name.isdigit()]


def process_tree(root: int) -> list[int]:
    """``root`` and every process below it (a server's master and its workers)."""
    parents = {pid: int(fields[1]) for pid in _pids() if (fields := _stat(pid))}
    tree, added = {root}, True
    while added:
        below = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= below
        added = bool(below)
    return sorted(tree)


def database_backends(database: str) -> list[int]:
    """PostgreSQL's backends serving ``database``: their title is ``postgres: USER DATABASE HOST ...``,
    after the server's ``cluster_name`` and a colon where one is set (Debian's: ``15/main:``)."""
    found = []
    for pid in _pids():
        try:
            title = (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if title[:1] != ["postgres:"]:
            continue
        words = title[2:] if len(title) > 1 and title[1].endswith(":") else title[1:]
        if len(words) >= 2 and words[1] == database:
            found.append(pid)
    return found


def cpu_seconds(pids: Iterable[int], kinds: tuple[int, ...] = (USER, SYSTEM)) -> dict[int, float]:
    """{pid: CPU seconds so far} of those still running: user and system time, or only the ``kinds``
    asked (``(SYSTEM,)``: the time the kernel spent on the process's behalf, its system calls)."""
    spent = {}
    for pid in pids:
        fields = _stat(pid)
        if fields:
            spent[pid] = sum(int(fields[kind]) for kind in kinds) / TICKS_PER_SECOND
    return spent


class CpuSpan:
    """CPU seconds the processes ``find()`` names spent between :meth:`start` and :meth:`stop`
    (found again at the end, so a database connection opened meanwhile counts too)."""

    def __init__(self, find: Callable[[], list[int]], kinds: tuple[int, ...] = (USER, SYSTEM)) -> None:
        self.find = find
        self.kinds = kinds
        self.before: dict[int, float] = {}

    def start(self) -> None:
        self.before = cpu_seconds(self.find(), self.kinds)

    def stop(self) -> float:
        after = cpu_seconds(self.find(), self.kinds)
        return sum(seconds - self.before.get(pid, 0.0) for pid, seconds in after.items())
