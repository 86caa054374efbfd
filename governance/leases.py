"""Quota leases: a gateway replica holds a few units of a busy counter ahead, so most requests are
admitted from memory, without waiting for Redis.

**Why.** Admission by the Redis script (:data:`governance.limits.ADMIT`) costs every request one
round trip, the largest part of what limits add to a request. A counter that one replica uses many
times a second does not need it: the replica takes, in the same script that admits a request, a
**lease** of units beyond the request's own (the use it saw in the last ``lease_seconds``), then
admits the next requests from the lease in memory and refills it in the background before it runs
out. Counters used less often than that are admitted by Redis one request at a time, as before.

**What stays true.** A leased unit is added to the Redis counter when it is leased, so whatever the
number of replicas the counter never grants more than its limit: no request more per window than a
requests limit, and tokens overshoot only by usage beyond reservations (docs/usage.md). What a lease
costs is the other way: units one replica holds are not available to the others, so with several
replicas a window can refuse requests while units leased by another are unused. That is bounded:
a lease is at most ``1/LEASE_SHARE`` of the counter's room when it is taken (none when fewer than
``LEASE_SHARE`` units are left beyond the request, so a limit of a few requests is counted exactly), and a replica gives
back what it has not used after ``idle_seconds`` (5 s) without use, when it stops, and whenever the
limit changes; units of a window that has ended are simply void with their key.

**Leases never refuse below the limit.** Each replica's unused units of a counter are kept in
Redis beside it (a hash by replica, updated when units are leased, given back, and at every flush,
``CHARGE_SECONDS``). A request that finds no room where the room is there but leased to other
replicas (the counter less what the others hold unused, as they last said, has room for it) is not
refused: the admission script raises the counter's reclaim flag, the holders give back everything
they hold of it at their next flush, and the request is asked again (every ``RECLAIM_POLL_SECONDS``,
for at most ``RECLAIM_SECONDS``). It is refused only when the room is really gone, or when a holder
did not answer in time (a replica stopped without giving back: its units stay counted until its hash
entry and the window expire). Near a limit a replica leases nothing anyway (under ``LEASE_SHARE``
units left), so the wait happens once per window, at its end, and only where leases were taken.

**Rates.** What to lease is the use of the last ``lease_seconds`` period that had any, remembered
per counter series (a scope's requests or tokens, whatever the window), so a pause or a new minute
starts leasing at once instead of going back to Redis for every request until the rate is seen again.

**Headers.** ``x-ratelimit-remaining-*`` say the limit minus the counter as last read, less this
replica's unused lease: exact with one replica; with several, as of this replica's last refill.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

LEASE_SHARE = 16  # a lease takes at most this fraction of a counter's room
IDLE_SECONDS = 5.0  # unused units are given back after this long without a request
RECLAIM_SECONDS = 0.3  # how long a request waits for other replicas to give leased units back
RECLAIM_POLL_SECONDS = 0.02  # how often it asks Redis again meanwhile
RECLAIM_FLAG_SECONDS = 1.0  # how long a counter's reclaim flag stays up (holders look at every flush)
RATE_MEMORY_SECONDS = 120.0  # a series' rate is forgotten after this long without a whole period of use


@dataclass
class Lease:
    """One counter as this replica sees it: ``held`` units already added to it, not yet used."""

    key: str
    limit: int
    resets_at: float
    held: int = 0
    value: int = 0  # the counter (every replica's use and leases) as last read or added to here
    period_start: float = 0.0
    period_use: int = 0
    last_period_use: int = 0
    last_used: float = 0.0
    refilling: bool = False
    granting: int = 0  # admissions of this counter in flight to Redis (they may add to what it holds)
    reported: int = 0  # ``held`` as Redis was last told (-1: to be told again)

    @property
    def used(self) -> int:
        """The counter less this replica's unused units: what has been used, as far as known here."""
        return self.value - self.held


@dataclass
class Take:
    """How one check of a request is admitted: ``local`` units from the lease, and when the lease
    is short (``by_redis``) ``remote`` units and a room check from Redis."""

    lease: Lease
    local: int
    remote: int
    by_redis: bool
    want: int  # lease units to ask Redis for beyond ``remote`` (0: none)


@dataclass
class LeaseBook:
    """This replica's leases, by counter key. Pure bookkeeping, no I/O: the counters call it."""

    lease_seconds: float
    idle_seconds: float = IDLE_SECONDS
    leases: dict[str, Lease] = field(default_factory=dict)
    # counter series (the key less its window) -> (units used in its last whole period, when): a
    # new window's counter starts leasing at the rate its series had, not from nothing each minute
    rates: dict[str, tuple[int, float]] = field(default_factory=dict)
    returns: dict[str, tuple[int, float]] = field(default_factory=dict)  # key -> (units, resets_at)

    def plan(self, checks: Sequence[Any], amounts: Sequence[int], now: float) -> list[Take]:
        """What each check takes from its lease and what it asks of Redis; the local units are set
        aside at once (another request of this event loop cannot take them meanwhile)."""
        takes = []
        for check, amount in zip(checks, amounts, strict=True):
            lease = self._lease(check, now)
            self._count_use(lease, amount, now)
            if lease.held >= max(amount, 1):  # room for it here: nobody else can have these units
                take = Take(lease, amount, 0, False, 0)
            else:
                take = Take(lease, lease.held, amount - lease.held, True, self._want(lease, amount))
            lease.held -= take.local
            takes.append(take)
        return takes

    @staticmethod
    def all_local(takes: Sequence[Take]) -> bool:
        return not any(take.by_redis for take in takes)

    @staticmethod
    def undo(takes: Sequence[Take]) -> None:
        """Redis refused (or failed): the units set aside go back to their leases."""
        for take in takes:
            take.lease.held += take.local

    @staticmethod
    def granted(takes: Sequence[Take], values: Sequence[int], extras: Sequence[int]) -> None:
        """Redis admitted: each counter's new value, ``extras`` units leased beyond the request's."""
        for take, value, extra in zip(takes, values, extras, strict=True):
            take.lease.value = value
            take.lease.held += extra

    def refills(self, takes: Sequence[Take], now: float) -> list[tuple[Lease, int]]:
        """(lease, units wanted) of each lease of ``takes`` that is busy and running low, marked as
        being refilled."""
        wanted = []
        for take in takes:
            lease = take.lease
            want = self._want(lease, 1)
            if not lease.refilling and lease.resets_at > now and lease.held * 2 < want:
                lease.refilling = True
                wanted.append((lease, want))
        return wanted

    def refilled(self, lease: Lease, value: int, extra: int) -> None:
        """A refill's answer; units leased for a lease replaced meanwhile (its limit changed) go back."""
        lease.value, lease.refilling = value, False
        if self.leases.get(lease.key) is lease:
            lease.held += extra
        elif extra:
            self.hand_back(lease.key, extra, lease.resets_at)

    def charged(self, key: str, tokens: int) -> None:
        """``tokens`` were added to the counter ``key`` by this replica (a usage settlement)."""
        lease = self.leases.get(key)
        if lease is not None:
            lease.value += tokens

    def give_back(self, now: float, everything: bool = False) -> dict[str, tuple[int, float]]:
        """Units to return, key -> (units, resets_at): unused leases idle for ``idle_seconds`` (or
        all, ``everything``) and those of limits that changed; leases of ended windows dropped."""
        for key in list(self.leases):
            lease = self.leases[key]
            if lease.resets_at <= now:
                del self.leases[key]
            elif lease.held and not lease.refilling and (everything or now - lease.last_used >= self.idle_seconds):
                self.hand_back(key, lease.held, lease.resets_at)
                lease.value -= lease.held
                lease.held = 0
        if len(self.rates) > len(self.leases):  # series no longer in use
            self.rates = {series: rate for series, rate in self.rates.items() if now - rate[1] < RATE_MEMORY_SECONDS}
        returns, self.returns = self.returns, {}
        return {key: entry for key, entry in returns.items() if entry[1] > now}

    def reports(self, now: float) -> list[Lease]:
        """Leases whose unused units Redis should be told of: every one holding units (whose reclaim
        flag is looked at with it), and those it was told of before."""
        return [lease for lease in self.leases.values()
                if (lease.held or lease.reported) and lease.resets_at > now and not lease.refilling
                and not lease.granting]  # units granted meanwhile would be overwritten by an older count

    def reclaim(self, lease: Lease) -> None:
        """Another replica was refused for want of units this one leased: all of them go back."""
        if lease.held:
            self.hand_back(lease.key, lease.held, lease.resets_at)
            lease.value -= lease.held
            lease.held = 0

    def hand_back(self, key: str, units: int, resets_at: float) -> None:
        """Queue ``units`` of counter ``key`` to be given back at the next :meth:`give_back`."""
        self.returns[key] = (self.returns.get(key, (0, 0.0))[0] + units, resets_at)

    def _lease(self, check: Any, now: float) -> Lease:
        lease = self.leases.get(check.key)
        if lease is not None and lease.limit != check.limit:  # the limit changed: start again
            if lease.held:
                self.hand_back(check.key, lease.held, lease.resets_at)
            lease = None
        if lease is None:
            rate = self.rates.get(_series(check.key), (0, 0.0))[0]
            lease = Lease(check.key, check.limit, check.resets_at, period_start=now, last_period_use=rate)
            self.leases[check.key] = lease
        return lease

    def _count_use(self, lease: Lease, amount: int, now: float) -> None:
        """Use per ``lease_seconds``: the last period's that had any, and this one's. A pause keeps
        the rate (traffic that pauses tends to come back as it was); what the lease holds meanwhile
        goes back after ``idle_seconds``."""
        if now - lease.period_start >= self.lease_seconds:
            if lease.period_use:
                lease.last_period_use = lease.period_use
                self.rates[_series(lease.key)] = (lease.period_use, now)
            lease.period_start, lease.period_use = now, 0
        lease.period_use += max(amount, 1)
        lease.last_used = now

    def _want(self, lease: Lease, amount: int) -> int:
        """Units worth leasing: the use of the last period, when that is at least two requests'."""
        if not self.lease_seconds:
            return 0
        recent = max(lease.last_period_use, lease.period_use)
        return recent if recent >= 2 * max(amount, 1) else 0


def _series(key: str) -> str:
    """The counter's series: its key less the window (``...:<minute>`` or ``...:<YYYYMM>``)."""
    return key.rpartition(":")[0]
