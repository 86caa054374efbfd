"""What other apps may use of ``inference_gateway``: the rules of where a model may answer, and the
gateway process's shared parts its hooks run on.

- **Placement** (``inference_gateway.placement``): every write path of a servable model checks its
  ``backendUrl`` and gateway id with the same rules the gateway routes by.
- **The gateway process** (``inference_gateway.db_thread``, ``inference_gateway.metrics``): the
  governance hooks run inside it, read the database off its event loop, count in its registry and
  see the status it records for a client that left (``CLIENT_LEFT``).

tests/test_architecture.py holds the other apps to this module (and ``inference_gateway.models``).
"""

from inference_gateway.db_thread import close_reads, read
from inference_gateway.metrics import CLIENT_LEFT, REGISTRY
from inference_gateway.placement import backend_url_errors, gateway_id, gateway_id_errors

__all__ = ["CLIENT_LEFT", "REGISTRY", "backend_url_errors", "close_reads", "gateway_id", "gateway_id_errors", "read"]
