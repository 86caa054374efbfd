"""What other apps may use of ``models_app``: waking a model that scaled to zero.

The gateway wakes a model when a request arrives for it (``inference_gateway.waking``), through the
same path as the portal's Wake button, and tells the caller why a wake was refused.
tests/test_architecture.py holds the other apps to this module (and ``models_app.models``).
"""

from models_app.controller import Reason
from models_app.wake import WakeRefused, wake

__all__ = ["Reason", "WakeRefused", "wake"]
