"""The one definition of "idle", shared by admission, the planner and the InferenceModel controller.

A model is idle once its cooldown has passed since it was last active: its last request, or its
creation when it was never requested (a model nobody ever asked for is as idle as one nobody asked
for lately). The controller scales an idle model to zero; admission and the planner offer the
same models as the ones whose scale-to-zero makes room, so a model the controller is about to
stop is never missing from the offer.
"""

from __future__ import annotations

from datetime import datetime, timedelta


def idle_since(last_active: datetime | None, cooldown: timedelta | None, now: datetime) -> datetime | None:
    """When the model became idle, or None when it is not idle at ``now`` (or has no cooldown)."""
    if last_active is None or cooldown is None:
        return None
    since = last_active + cooldown
    return since if since < now else None
