"""Wake from zero on request: the Wake button's path (``models_app.wake``), shared by every request
that arrives while it runs, and held until the model serves or ``timeout`` passes.

The first request for a sleeping managed model starts one wake: ``models_app.wake.wake`` stamps
the request on the model and its dependencies and reconciles them, dependencies first, through
memory admission. Then the model is reconciled again every ``poll`` seconds (reconciles are
idempotent and run one at a time per object, clusters/sync/work_queue.py) until the controller reports
it ``Deployed``, i.e. its Deployment has a ready replica; a dependency that became ready in the
meantime lets the model start at the next pass. Requests arriving meanwhile wait on the same wake.
A wake refused for a cause that only a change to the model can clear (a rule, the cluster's
refusal, a model larger than its whole pool) answers at once, 409; one that does not finish
within ``timeout`` answers 503 with the last reason the controller
gave (``InsufficientMemory`` and the planner's message naming what would make room, ``Pending``
and the dependencies it waits for...), and the next request starts a new one.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model

from clusters.models import AuditEntry
from clusters.sync.audit import Actor
from clusters.sync.controllers import reconcile_row
from common.db_thread import WAKES, in_thread
from inference_gateway.callers import Caller
from inference_gateway.routes import MODEL_OF, Route
from models_app.public import Reason, WakeRefused, wake

FRESH_SECONDS = 30.0


class NotAwake(Exception):
    """The model did not become ready in time (or cannot be woken); the message says why.
    ``refused``: the wake was refused for a cause only a change to the model can clear (a rule,
    the cluster's refusal, more than its pool holds in all), so waiting or retrying cannot help."""

    def __init__(self, message: str, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


@dataclass
class WakeState:
    """A wake in progress: the controller's latest answer and when it gives up."""

    deadline: float
    reason: str = "the wake has not started yet"
    refused: bool = False
    task: asyncio.Task | None = field(default=None, repr=False)


def _actor(caller: Caller) -> Actor:
    user = get_user_model().objects.filter(pk=caller.user_id).first()
    return Actor(f"{caller.username} (gateway)", AuditEntry.Source.API, user)


def wake_until_ready(route: Route, caller: Caller, state: WakeState, poll: float) -> bool:
    """Blocking (a worker thread): wake, then reconcile until ``Deployed`` or the deadline."""
    row = MODEL_OF[route.kind].objects.select_related("cluster").get(pk=route.pk)
    try:
        outcome = wake(row, _actor(caller))[row.name]
    except WakeRefused as error:
        if not error.capacity:  # refused for good, unless the cluster could not be reached (503)
            state.reason, state.refused = str(error), error.http_status < 500
            return False
        outcome = str(error)  # admission refused it for now: capacity may free before the deadline
    while True:
        if not outcome.startswith("already being reconciled"):
            state.reason = outcome
        if outcome.startswith(Reason.DEPLOYED + ":"):
            return True
        remaining = state.deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(poll, remaining))
        row.refresh_from_db()
        outcome = reconcile_row(row)


class Waker:
    """One wake per model at a time, shared by the requests that wait for it."""

    def __init__(self, timeout: float, poll: float) -> None:
        self.timeout, self.poll = timeout, poll
        self.wakes: dict[tuple, WakeState] = {}
        self.woken: dict[tuple, float] = {}

    async def until_ready(self, route: Route, caller: Caller) -> None:
        """Return once the model serves; raise NotAwake with the reason after ``timeout``.

        A model woken in the last ``FRESH_SECONDS`` counts as awake: the catalog may still show it
        at zero for a moment, and no cooldown is that short."""
        if time.monotonic() - self.woken.get(route.key, -FRESH_SECONDS) < FRESH_SECONDS:
            return
        state = self.wakes.get(route.key)
        if state is None:
            state = WakeState(deadline=time.monotonic() + self.timeout)
            state.task = asyncio.ensure_future(
                in_thread(lambda: wake_until_ready(route, caller, state, self.poll), WAKES)
            )
            state.task.add_done_callback(lambda _: self.wakes.pop(route.key, None))
            self.wakes[route.key] = state
        try:
            ready = await asyncio.wait_for(asyncio.shield(state.task), timeout=self.timeout)
        except TimeoutError:
            ready = False
        if ready:
            self.woken[route.key] = time.monotonic()
            return
        if state.refused:
            raise NotAwake(f"model {route.model} cannot be woken: {state.reason}", refused=True)
        waited = f"model {route.model} is not ready after waiting {self.timeout:g} s for its wake"
        raise NotAwake(f"{waited}: {state.reason}")
