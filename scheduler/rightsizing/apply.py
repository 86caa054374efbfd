"""Applying a recommendation: the spec's memory becomes the recommended value, saved as a portal
edit (audited, then synced to the cluster like any other edit)."""

from __future__ import annotations

from clusters.audit import Actor
from clusters.quantities import format_bytes
from clusters.services import save_portal_edit
from clusters.validation import FieldError, ManifestInvalid
from models_app.models import InferenceModel
from scheduler.rightsizing.models import Observation
from scheduler.rightsizing.policy import Policy
from scheduler.rightsizing.report import row_for


def apply_recommendation(model: InferenceModel, policy: Policy, actor: Actor) -> InferenceModel:
    """Set ``spec.memory`` to the recommendation for the newest observation; refuse when there is none."""
    observation = Observation.objects.filter(model=model, is_latest=True).select_related("model__cluster").first()
    if observation is None:
        raise ManifestInvalid([FieldError("spec.memory", model.spec.get("memory"), "has no observation to apply")])
    observation.model = model
    row = row_for(observation, policy)
    if row.recommended_bytes is None or row.recommended_bytes == row.declared_bytes:
        raise ManifestInvalid(
            [FieldError("spec.memory", model.spec.get("memory"), f"has no change to apply ({row.recommendation})")]
        )
    made_from = model.edit_version()  # the row the recommendation was read with: refused if it changed since
    model.spec = {**model.spec, "memory": format_bytes(row.recommended_bytes)}
    model.clean()  # the CRD schema and rules, like every other edit
    return save_portal_edit(model, actor, made_from=made_from)
