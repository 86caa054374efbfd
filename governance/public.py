"""What other apps may use of ``governance``: the gateway's hooks for team limits and the usage ledger,
and the GPU sampling pass.

The gateway (``inference_gateway.server``) builds one :class:`Governance` and asks it, per request,
whether the caller's team may go on and what the answer used. The live demo, which runs no Celery
beat, takes GPU samples itself with :func:`sample_gpu_holdings` (beat's task). Everything else of governance (the
ledger's tables, showback, the team pages) is reached through its URLs and ``governance.models``.
tests/test_architecture.py holds the other apps to this module.
"""

from governance.gateway import Governance
from governance.tasks import sample_gpu_holdings

__all__ = ["Governance", "sample_gpu_holdings"]
