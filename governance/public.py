"""What other apps may use of ``governance``: the gateway's hooks for team limits and the usage ledger.

The gateway (``inference_gateway.server``) builds one :class:`Governance` and asks it, per request,
whether the caller's team may go on and what the answer used. Everything else of governance (the
ledger's tables, showback, the team pages) is reached through its URLs and ``governance.models``.
tests/test_architecture.py holds the other apps to this module.
"""

from governance.gateway import Governance

__all__ = ["Governance"]
