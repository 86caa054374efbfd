"""Objects the portal's controllers own (Deployments, Jobs, CronJobs, ConfigMaps): written with
server-side apply under the field manager ``inference-portal``, only when they differ.

The API server fills in defaults (``strategy``, ``dnsPolicy``, ``terminationMessagePath``, a
port's ``protocol``...) and rewrites quantities in canonical form, so the object it returns is
never equal to the one asked for; other writers (``kubectl patch``, an admission webhook, the
gateway's last-request stamp) add fields of their own. ``differs`` compares what the portal asks
for with what is there *semantically* and *by ownership*, as server-side apply itself decides:

- every field asked for must be there with the same value (quantities by value), whoever set it;
- a field the portal does not ask for is a difference only if the portal's own apply owns it (its
  ``managedFields`` entry: manager ``inference-portal``, operation ``Apply``): then an apply
  removes it. A field another manager owns stays whatever the portal sends, so comparing it would
  apply on every pass for ever (a ``limits.ephemeral-storage`` added by ``kubectl patch``);
- a map or list the API declares atomic (``nodeSelector``, ``selector``, ``args``) is owned whole
  (an empty entry in the fields): it must be exactly what is asked for. Another writer's change
  to it takes the whole of it over, and from then on only what the portal asks for is compared;
- in a list the portal owns item by item (containers, env, ports: ``k:``/``v:``/``i:`` entries),
  the wanted items must be there in order; items of other managers between them are left alone.

So a steady state sends no writes, and an apply happens exactly when it would change something.

Before touching an existing object, ``ensure`` checks that its controller is the owner at hand:
the portal never takes over an object of the same name that someone else made.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson

from clusters.kube.client import FIELD_MANAGER
from clusters.validation.quantities import quantity_to_decimal

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


def applied_fields(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The fields (``fieldsV1``) the portal's server-side apply owns in ``obj``; None when it has
    never applied the object (then everything it asks for is compared as a whole)."""
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        if entry.get("manager") == FIELD_MANAGER and entry.get("operation") == "Apply" and not entry.get("subresource"):
            return entry.get("fieldsV1") or {}
    return None


def _child(owned: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    return None if owned is None else owned.get(f"f:{name}")


def _item_fields(owned: dict[str, Any], index: int, item: Any) -> dict[str, Any] | None:
    """The portal's fields of one list ``item``: by its key fields (``k:{"name":"x"}``), its value
    (``v:"x"``, a set of scalars) or its position (``i:0``); None when the portal owns none of it."""
    for name, fields in owned.items():
        kind, _, text = name.partition(":")
        if kind == "i" and text == str(index):
            return fields
        if kind == "v" and orjson.loads(text) == item:
            return fields
        if kind == "k" and isinstance(item, dict) and orjson.loads(text).items() <= item.items():
            return fields
    return None


def _list_differs(desired: list[Any], current: list[Any], owned: dict[str, Any] | None, key: str) -> bool:
    items = {name: fields for name, fields in (owned or {}).items() if name[:2] in ("k:", "v:", "i:")}
    if not items:  # an atomic list (args, command), or one the portal has not applied yet: all of it
        return len(desired) != len(current) or any(
            differs(want, have, None, key) for want, have in zip(desired, current, strict=True)
        )
    matched: set[int] = set()
    remaining = iter(enumerate(current))
    for want in desired:  # the wanted items, in order, among everyone's
        for index, have in remaining:
            if not differs(want, have, _item_fields(items, index, have), key):
                matched.add(index)
                break
        else:
            return True
    return any(
        _item_fields(items, index, have) is not None for index, have in enumerate(current) if index not in matched
    )


def differs(
    desired: Any, current: Any, owned: dict[str, Any] | None = None, key: str = "", quantity: bool = False
) -> bool:
    """True when an apply of ``desired`` would change ``current`` (see the module's docstring);
    ``owned`` is the portal's part of ``current`` (``applied_fields``) at this level. Values under
    ``limits``/``requests`` are quantities and compare by value (``1000m`` is ``1``)."""
    if isinstance(desired, dict):
        if not isinstance(current, dict):
            return bool(desired) or current not in (None, {})
        extra = set(current) - set(desired)
        if owned == {} and desired and extra:
            return True  # an atomic map the portal owns whole (nodeSelector, selector): all of it is asked for
        if owned and any(f"f:{name}" in owned for name in extra):
            return True  # the portal set it before and no longer asks for it: the apply removes it
        quantities = key in QUANTITY_MAPS
        return any(
            differs(value, current.get(name), _child(owned, name), name, quantities) for name, value in desired.items()
        )
    if isinstance(desired, list):
        if not isinstance(current, list):
            return bool(desired) or current not in (None, [])
        return _list_differs(desired, current, owned, key)
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
    if current is not None and not differs(desired, current, applied_fields(current)):
        return current
    return resource.apply(metadata["namespace"], desired)
