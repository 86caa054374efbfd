"""Child processes that end with the process that started them, however it ends."""

from __future__ import annotations

import ctypes
import signal

_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: a preexec_fn must not load libraries
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``preexec_fn`` of a child: the kernel ends it (SIGTERM) when the thread that started it ends,
    even by SIGKILL, so no server, etcd or kube-apiserver outlives a killed supervisor, test run or
    demo. Linux only (``prctl(PR_SET_PDEATHSIG)``); elsewhere a no-op."""
    prctl = getattr(_LIBC, "prctl", None)
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
