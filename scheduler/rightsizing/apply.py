"""Applying a recommendation: the spec's memory becomes the recommended value, saved as a portal
edit (audited, then synced to the cluster like any other edit), and the newest observation is
re-judged against the new declaration so the report shows it as done at once."""

from __future__ import annotations

from clusters.audit import Actor
from clusters.quantities import format_bytes
from clusters.services import save_portal_edit
from clusters.validation import FieldError, ManifestInvalid
from models_app.models import InferenceModel
from scheduler.rightsizing.models import Observation
from scheduler.rightsizing.policy import Policy, evaluate


def apply_recommendation(model: InferenceModel, policy: Policy, actor: Actor) -> InferenceModel:
    """Set ``spec.memory`` to the recommendation for the newest observation; refuse when there is none."""
    observation = Observation.objects.filter(model=model, is_latest=True).first()
    if observation is None:
        raise ManifestInvalid([FieldError("spec.memory", model.spec.get("memory"), "has no observation to apply")])
    if observation.peak_bytes is None or not model.memory_bytes:
        reason = f"has no change to apply ({observation.recommendation})"
        raise ManifestInvalid([FieldError("spec.memory", model.spec.get("memory"), reason)])
    verdict = evaluate(model.memory_bytes, observation.peak_bytes, policy, oom_killed=observation.oom_killed)
    if not verdict.changes:
        raise ManifestInvalid(
            [FieldError("spec.memory", model.spec.get("memory"), f"has no change to apply ({verdict.recommendation})")]
        )
    made_from = model.edit_version()  # the row the recommendation was read with: refused if it changed since
    model.spec = {**model.spec, "memory": format_bytes(verdict.recommended_bytes)}
    model.clean()  # the CRD schema and rules, like every other edit
    saved = save_portal_edit(model, actor, made_from=made_from)
    rejudge(observation, saved.memory_bytes, policy)
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
