"""What other apps may use of ``models_app``: waking a model that scaled to zero, and the slot for the
gateway's rules.

- **Waking** (the gateway wakes a model when a request arrives for it, ``inference_gateway.waking``,
  through the same path as the portal's Wake button, and tells the caller why a wake was refused):
  ``wake``, ``WakeRefused``, ``Reason``.
- **KubeAI Models the portal controls** (the gateway routes them to the Service the controller
  renders, and its autoscaler writes their replicas): ``KUBEAI_ENGINE_PORT``, ``kubeai_service_name``,
  ``KUBEAI_KIND``, ``wanted_replicas``.
- **The gateway's rules** (the gateway hands down the placement rules the serving models' write
  paths check, from its ``ready()``): ``GatewayRules``, ``register_gateway_rules``.
tests/test_architecture.py holds the other apps to this module (and ``models_app.models``).
"""

from models_app.controller import Reason
from models_app.gateway_rules import GatewayRules, register_gateway_rules
from models_app.kubeai_controller import KIND as KUBEAI_KIND
from models_app.kubeai_controller import PORT as KUBEAI_ENGINE_PORT
from models_app.kubeai_controller import service_name as kubeai_service_name
from models_app.kubeai_controller import wanted_replicas
from models_app.wake import WakeRefused, wake

__all__ = [
    "KUBEAI_ENGINE_PORT",
    "KUBEAI_KIND",
    "GatewayRules",
    "Reason",
    "WakeRefused",
    "kubeai_service_name",
    "register_gateway_rules",
    "wake",
    "wanted_replicas",
]
