"""What other apps may use of ``models_app``: waking a model that scaled to zero, and the slot for the
gateway's rules.

- **Waking** (the gateway wakes a model when a request arrives for it, ``inference_gateway.waking``,
  through the same path as the portal's Wake button, and tells the caller why a wake was refused):
  ``wake``, ``WakeRefused``, ``Reason``.
- **The gateway's rules** (the gateway hands down the placement rules the serving models' write
  paths check, from its ``ready()``): ``GatewayRules``, ``register_gateway_rules``.
tests/test_architecture.py holds the other apps to this module (and ``models_app.models``).
"""

from models_app.controller import Reason
from models_app.gateway_rules import GatewayRules, register_gateway_rules
from models_app.wake import WakeRefused, wake

__all__ = ["GatewayRules", "Reason", "WakeRefused", "register_gateway_rules", "wake"]
