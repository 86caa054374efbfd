"""Applying a recommendation: the pods' memory in the spec becomes the recommended value, saved as
a portal edit (audited, then synced to the cluster like any other edit), and the newest observation
is re-judged against the new declaration so the report shows it as done at once.

Any serving kind whose pods' memory is in its spec (``pod_memory_path``, ``spec_with_pod_memory()``;
see scheduler/rightsizing/kinds.py) can be applied to; the others are refused, naming why.
"""

from __future__ import annotations

from clusters.models import KubeObject
from clusters.sync.audit import Actor
from clusters.validation.quantities import format_bytes
from clusters.validation.schemas import FieldError, ManifestInvalid
from clusters.web.services import save_portal_edit
from scheduler.rightsizing.kinds import applicable
from scheduler.rightsizing.models import Observation
from scheduler.rightsizing.policy import Policy, evaluate


def apply_recommendation(obj: KubeObject, policy: Policy, actor: Actor) -> KubeObject:
    """Set the pods' memory to the recommendation for the newest observation; refuse when there is none."""
    if not applicable(type(obj)):
        rule = "declares its pods' memory outside its spec: right-sizing can recommend, not apply"
        raise ManifestInvalid([FieldError("kind", obj.kube.kind, rule)])
    path, declared = obj.pod_memory_path, obj.pod_resources().memory_bytes
    shown = format_bytes(declared) if declared else None
    observation = Observation.objects.filter(kind=obj.kube.kind, object_id=obj.pk, is_latest=True).first()
    if observation is None:
        raise ManifestInvalid([FieldError(path, shown, "has no observation to apply")])
    if observation.peak_bytes is None or not declared:
        raise ManifestInvalid([FieldError(path, shown, f"has no change to apply ({observation.recommendation})")])
    verdict = evaluate(declared, observation.peak_bytes, policy, oom_killed=observation.oom_killed)
    if not verdict.changes:
        raise ManifestInvalid([FieldError(path, shown, f"has no change to apply ({verdict.recommendation})")])
    made_from = obj.edit_version()  # the row the recommendation was read with: refused if it changed since
    obj.spec = obj.spec_with_pod_memory(format_bytes(verdict.recommended_bytes))
    obj.clean()  # the CRD schema and rules, like every other edit
    saved = save_portal_edit(obj, actor, made_from=made_from)
    rejudge(observation, saved.pod_resources().memory_bytes, policy)
    return saved


def rejudge(observation: Observation, declared_bytes: int, policy: Policy) -> None:
    """The observation's verdict against a new declaration (the peak stays what was observed)."""
    verdict = evaluate(declared_bytes, observation.peak_bytes, policy, oom_killed=observation.oom_killed)
    Observation.objects.filter(pk=observation.pk).update(
        declared_bytes=declared_bytes,
        ratio=verdict.ratio,
        utilization_percent=verdict.utilization_percent,
        recommended_bytes=verdict.recommended_bytes,
        freed_bytes=verdict.freed_bytes,
        recommendation=verdict.recommendation,
        overprovisioned=verdict.overprovisioned,
    )
