"""Registry of controllers: which kinds the portal can control, and how.

The apps register a reconcile function per kind they can control from their ``ready()``
(``models_app`` for InferenceModel, ``runs_app`` for InferenceRun), the way kinds register in
``clusters.kinds``. The passes that run them live in ``clusters.sync.controllers``; this registry
sits below the models because ``Cluster.clean()`` checks ``managed_kinds`` against it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Model

# The models import this registry, so it names what it holds by Django's base class and the
# Kubernetes client as Any: importing them, even for type hints, would close a circle.

Reconciler = Callable[[Any, Model, datetime], str]  # (ClusterGateway, KubeObject row, now)
_reconcilers: dict[str, Reconciler] = {}
_children: dict[str, tuple[ChildKind, ...]] = {}
_sweeps: dict[str, Callable[[Model], object]] = {}
_finalizers: dict[str, str] = {}
_reads: dict[str, tuple[str, ...]] = {}


@dataclass(frozen=True)
class ChildKind:
    """A built-in kind a controller creates and owns; the watcher follows it (by label) to reconcile the owner."""

    api_version: str
    kind: str
    selector: str


def register_controller(
    kind: str,
    reconcile: Reconciler,
    children: tuple[ChildKind, ...] = (),
    sweep: Callable[[Model], object] | None = None,
    finalizer: str | None = None,
    reads: tuple[str, ...] = (),
) -> None:
    """Called from an app's ``ready()``: ``reconcile(gateway, row, now) -> outcome text``; ``children``
    are the owned kinds whose changes should wake the owner's reconcile at once; ``sweep(cluster)``
    runs once per pass, for what belongs to objects no longer there (no reconcile reaches those);
    ``finalizer`` is the one the controller puts on its objects (released when it stops managing);
    ``reads`` are the other mirrored kinds its reconcile reads by name (a run's InferenceConfig),
    which a pass lists once instead of reading each one live per object."""
    _reconcilers[kind] = reconcile
    _children[kind] = children
    _reads[kind] = reads
    if sweep is not None:
        _sweeps[kind] = sweep
    if finalizer is not None:
        _finalizers[kind] = finalizer


def controller_finalizer(kind: str) -> str | None:
    return _finalizers.get(kind)


def controller_children(kind: str) -> tuple[ChildKind, ...]:
    return _children.get(kind, ())


def controller_reads(kind: str) -> tuple[str, ...]:
    return _reads.get(kind, ())


def controllable_kinds() -> list[str]:
    return sorted(_reconcilers)


def reconciler_for(kind: str) -> Reconciler | None:
    """The reconcile function registered for ``kind``, or None when the portal only mirrors it."""
    return _reconcilers.get(kind)


def sweeps() -> Iterable[tuple[str, Callable[[Model], object]]]:
    """Each controlling kind's sweep, run once per reconcile pass."""
    return _sweeps.items()
