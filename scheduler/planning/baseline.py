"""A cluster's running models placed where they run, kept per process for the next plan.

Why: a plan keeps the running models where they are, placing them first, in their own
biggest-first order, before any proposal (the ``fixed`` items of
:func:`scheduler.planning.placement.place`). That part of the placement depends on the running models and
the pools' nodes only, never on the proposal, and at 10,000 running models it was most of a
plan's placement: their pods built, sorted and placed, every request.

It is kept with what it was placed from: the holdings tuple (:mod:`scheduler.holdings_cache`
hands out the very same tuple while the cluster's rows are unchanged, and a new one as soon as
they change) and the pools' shapes (read by every plan, compared here). Each plan goes on from a
copy (:meth:`scheduler.planning.placement.Placer.copy`), which places the proposal exactly as placing
everything anew would. Plans that do not place every running model first (a re-pack, an edit of
a running model, ``include_running`` off) do not come here.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.holdings import Holding
from scheduler.per_cluster import PerCluster
from scheduler.planning.inputs import PoolShapes, fixed_items
from scheduler.planning.placement import Placer

_kept: PerCluster[tuple[Sequence[Holding], PoolShapes, Placer]] = PerCluster()


def running_placed(cluster_id: int, holdings: Sequence[Holding], shapes: PoolShapes) -> Placer:
    """A placer holding every running model of ``holdings`` placed in ``shapes``' pools, biggest
    first: the caller's own copy, to place its proposal with."""
    kept = _kept.get(cluster_id)
    if kept is not None and kept[0] is holdings and kept[1].shapes == shapes.shapes:
        return kept[2].copy()
    placer = Placer(shapes.spaces())
    placer.add(fixed_items(holding for holding in holdings if holding.running))
    _kept.put(cluster_id, (holdings, shapes, placer))
    return placer.copy()
