"""Staff's placement decisions (shared namespaces, backend hosts, shared ids) as audited writes.

The admin and the API both save through :func:`save_decision` and :func:`delete_decision`, so each
change lands in the audit log (``clusters.AuditEntry``, kind = the model's name) with who, from
where and the field diff (the gateway reloads its routes on the trigger's notice,
``inference_gateway.notices``).
"""

from __future__ import annotations

from typing import Any

from django.db import models, transaction
from django.forms.models import model_to_dict

from clusters.models import AuditEntry
from clusters.sync.audit import Actor, json_diff
from inference_gateway.models import BackendHost, SharedGatewayId, SharedNamespace

DECISIONS: tuple[type[models.Model], ...] = (SharedNamespace, BackendHost, SharedGatewayId)


def _fields(obj: models.Model) -> dict[str, Any]:
    return {key: value for key, value in model_to_dict(obj).items() if key != "id"}


def _record(obj: Any, action: str, actor: Actor, changes: list[dict[str, Any]]) -> None:
    AuditEntry.objects.create(
        kind=type(obj).__name__, object_id=obj.pk, cluster_id=obj.cluster_id,
        namespace=getattr(obj, "namespace", ""), name=obj.audit_name[:253], action=action, source=actor.source,
        actor=actor.user, actor_label=actor.label, changes=changes,
    )


def save_decision(obj: Any, actor: Actor) -> Any:
    with transaction.atomic():
        before = _fields(type(obj).objects.get(pk=obj.pk)) if obj.pk else {}
        obj.save()
        changes = json_diff(before, _fields(obj))
        if changes or not before:
            _record(obj, AuditEntry.Action.UPDATED if before else AuditEntry.Action.CREATED, actor, changes)
    return obj


def delete_decision(obj: Any, actor: Actor) -> None:
    with transaction.atomic():
        _record(obj, AuditEntry.Action.DELETED, actor, json_diff(_fields(obj), {}))
        obj.delete()
