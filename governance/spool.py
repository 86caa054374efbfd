"""The ledger's spool: every request record appended to a file of its gateway process before it
is queued, so that rows a killed process (``kill -9``, the OOM killer) had not written yet are
written by the next one instead of being lost uncounted.

**Exactly once.** Each process appends to a spool file of its own (one JSON array a line) and
holds an exclusive ``flock`` on it, which the kernel releases when the process dies, however it
dies. The writer records how many of the file's bytes are in the ledger in the ledger database's
``governance_ledgerspool``, in the transaction that writes the rows (:mod:`governance.ledger`).
A writer starting (and every ``ORPHAN_SECONDS``) looks for spool files nobody holds: for each it
reads the rows after that mark, writes them with the mark moving in the same transactions, then
deletes the file and its mark. A row is thus written once whatever moment the process died at; a
line that cannot be read back (a write the death cut short) is counted as lost.

**Cost.** One ``write(2)`` of ~200 bytes a request to the page cache (no ``fsync``: it survives the
process, not the machine), measured in docs/usage.md. A spool whose rows are all written is
replaced by a new file once it passes ``ROTATE_BYTES``, so files stay small.

Files live in ``USAGE_LEDGER_SPOOL_DIR`` (default: the system's temporary directory), in a folder
per ledger database, so that a spool is only ever replayed into the database its rows were meant
for. In a container, mount it on a volume that outlives the process (an ``emptyDir`` outlives a
container's restarts).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import tempfile
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

ROTATE_BYTES = 8 * 1024 * 1024
SUFFIX = ".spool"
Row = tuple[Any, ...]


def spool_dir(configured: str, database: str) -> Path:
    """The folder of ``database``'s spools (``configured`` or the temporary directory)."""
    base = Path(configured) if configured else Path(tempfile.gettempdir()) / "inference-portal-ledger-spool"
    folder = base / hashlib.sha256(database.encode()).hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def encode(row: Row) -> bytes:
    """One spool line (orjson writes ``started_at``, a datetime, in ISO 8601)."""
    return orjson.dumps(row) + b"\n"


def decode(line: bytes) -> Row:
    """A row read back from a spool line (ValueError when it is not one)."""
    values = orjson.loads(line)
    if not isinstance(values, list) or not values or not isinstance(values[0], str):
        raise ValueError("not a spooled request record")
    values[0] = datetime.fromisoformat(values[0])
    return tuple(values)


class Spool:
    """This process's spool file, appended to by the request path (the event loop's thread)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}{SUFFIX}"
        # locked under another name, then renamed (the lock stays with the file): no other process
        # ever sees this spool unlocked and takes it for a dead one's
        opening = self.path.with_suffix(".opening")
        self.fd = os.open(opening, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(opening, self.path)
        self.size = 0

    @property
    def name(self) -> str:
        return self.path.name

    def append(self, row: Row) -> int:
        """Append ``row``; the spool's size after it (the mark that says it is written)."""
        line = encode(row)
        os.write(self.fd, line)
        self.size += len(line)
        return self.size

    def close(self, remove: bool) -> None:
        """Close (and release) the file; ``remove`` it when every row in it is written."""
        if remove:
            self.path.unlink(missing_ok=True)
        os.close(self.fd)


class Orphan:
    """A spool file no live process holds (its lock taken by this one while it is replayed)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd = path, fd

    @property
    def name(self) -> str:
        return self.path.name

    def rows(self, start: int) -> Iterator[tuple[Row | None, int]]:
        """``(row, mark after it)`` for each line after byte ``start``; None for a line that cannot
        be read back (cut short by the process's death)."""
        with open(self.path, "rb") as file:
            file.seek(start)
            mark = start
            for line in file:
                mark += len(line)
                try:
                    row = decode(line) if line.endswith(b"\n") else None
                except ValueError:
                    row = None
                yield row, mark

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
        os.close(self.fd)

    def release(self) -> None:
        os.close(self.fd)


def orphans(folder: Path, own: str) -> list[Orphan]:
    """The spool files in ``folder`` whose process is gone (their lock is free), locked for the caller."""
    found = []
    for path in sorted(folder.glob(f"*{SUFFIX}")):
        if path.name == own:
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:  # replayed and removed by another process meanwhile
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a live process's own, or being replayed by another
            os.close(fd)
            continue
        if not path.exists():  # removed between the open and the lock
            os.close(fd)
            continue
        found.append(Orphan(path, fd))
    return found
