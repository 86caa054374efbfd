"""What other apps may use of ``accounts``: who may see and act where, and API tokens.

The other apps import ``accounts`` through this module (and ``accounts.models`` for its tables),
never its other modules; tests/test_architecture.py holds them to it. Three concerns:

- **Where a user may act** (``accounts.access``): the restriction every page and endpoint applies.
- **Access tokens from the organisation's identity provider** (``accounts.access_tokens``): what the
  gateway accepts as a bearer besides the portal's own tokens.
- **The portal's own API tokens** (``accounts.tokens``): issued by the local demo.
"""

from accounts.access import (
    ACTION_BY_METHOD,
    ADD,
    CHANGE,
    DELETE,
    VIEW,
    can_act_in,
    everywhere,
    grants_of,
    is_unrestricted,
    namespace_predicate,
    restrict,
    unreadable_references,
    visible_cluster_ids,
    visible_clusters,
)
from accounts.access_tokens import InvalidAccessToken, looks_like_jwt, verify_access_token
from accounts.tokens import issue_token

__all__ = [
    "ACTION_BY_METHOD",
    "ADD",
    "CHANGE",
    "DELETE",
    "VIEW",
    "InvalidAccessToken",
    "can_act_in",
    "everywhere",
    "grants_of",
    "is_unrestricted",
    "issue_token",
    "looks_like_jwt",
    "namespace_predicate",
    "restrict",
    "unreadable_references",
    "verify_access_token",
    "visible_cluster_ids",
    "visible_clusters",
]
