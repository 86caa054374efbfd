"""Objects the portal's controllers own (Deployments, Jobs, CronJobs, ConfigMaps): written with
server-side apply under the field manager ``inference-portal``, only when they differ.

The API server fills in defaults (``strategy``, ``dnsPolicy``, ``terminationMessagePath``, a
port's ``protocol``...) and rewrites quantities in canonical form, so the object it returns is
never equal to the one asked for. ``differs`` compares what the portal asks for with what is
there *semantically*: every field asked for must be there with the same value (quantities by
value); fields the server or other writers added are left alone, except in the maps the portal
owns whole (``OWNED_WHOLE``), where a key the portal dropped must go too. So a steady state
sends no writes, and an apply happens exactly when the portal's intent is not in the cluster.

Before touching an existing object, ``ensure`` checks that its controller is the owner at hand:
the portal never takes over an object of the same name that someone else made.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from clusters.validation.quantities import quantity_to_decimal

# Maps whose keys the portal sets completely: a key missing from the desired object is removed.
OWNED_WHOLE = frozenset({"nodeSelector", "limits", "requests", "data", "matchLabels"})
QUANTITY_MAPS = frozenset({"limits", "requests"})
LABEL_VALUE_MAX = 63
_LABEL_VALUE_INVALID = re.compile(r"[^A-Za-z0-9._-]+")


class NotOwnedError(Exception):
    """An object of the wanted name exists and another owner (or none) controls it."""


def label_value(text: str) -> str:
    """``text`` as a valid label value: characters outside ``[A-Za-z0-9._-]`` become ``-`` (a
    Hugging Face id ``org/model`` becomes ``org-model``), alphanumeric at both ends, and at most
    63 characters; a shortened value ends in a hash of the whole, so two long names stay apart."""
    value = _LABEL_VALUE_INVALID.sub("-", text).strip("-_.")
    if len(value) <= LABEL_VALUE_MAX:
        return value
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    return f"{value[: LABEL_VALUE_MAX - len(digest) - 1].rstrip('-_.')}-{digest}"


def _same_scalar(want: Any, have: Any, quantity: bool) -> bool:
    if want == have:
        return True
    if quantity and isinstance(want, str | int) and isinstance(have, str | int):
        wanted = quantity_to_decimal(want)
        return wanted is not None and wanted == quantity_to_decimal(have)
    return False


def differs(desired: Any, current: Any, key: str = "", quantity: bool = False) -> bool:
    """True when ``current`` lacks something of ``desired`` (see the module's docstring).
    Values under ``limits``/``requests`` are quantities and compare by value (``1000m`` is ``1``)."""
    if isinstance(desired, dict):
        if not isinstance(current, dict):
            return bool(desired) or current not in (None, {})
        if key in OWNED_WHOLE and set(current) - set(desired):
            return True
        quantities = key in QUANTITY_MAPS
        return any(differs(value, current.get(name), name, quantities) for name, value in desired.items())
    if isinstance(desired, list):
        if not isinstance(current, list):
            return bool(desired) or current not in (None, [])
        return len(desired) != len(current) or any(differs(d, c, key) for d, c in zip(desired, current, strict=True))
    return not _same_scalar(desired, current, quantity)


def controller_uid(obj: dict[str, Any]) -> str | None:
    for reference in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if reference.get("controller"):
            return reference.get("uid")
    return None


def ensure(resource: Any, desired: dict[str, Any]) -> dict[str, Any]:
    """The object as the cluster has it after making it match ``desired`` (server-side apply only
    when it differs). ``desired`` carries one controller owner reference; NotOwnedError when an
    object of that name has another controller or none."""
    metadata = desired["metadata"]
    current = resource.get(metadata["namespace"], metadata["name"])
    if current is not None and controller_uid(current) != controller_uid(desired):
        kind = desired["kind"]
        raise NotOwnedError(
            f"{kind} {metadata['namespace']}/{metadata['name']} already exists and is not controlled by this "
            f"object; the portal does not take it over (delete or rename it)"
        )
    if current is not None and not differs(desired, current):
        return current
    return resource.apply(metadata["namespace"], desired)
