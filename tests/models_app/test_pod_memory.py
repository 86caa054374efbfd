"""Right-sizing sets an InferenceModel's pod memory in one place for the model and the scheduler:
``spec.memory`` and the container's memory request move together; a limit below it is raised."""

from __future__ import annotations

from models_app.models import InferenceModel


def model_with(resources: dict) -> InferenceModel:
    return InferenceModel(spec={"modelName": "m", "memory": "48Gi", "resources": resources})


def test_spec_memory_and_the_request_change_together():
    spec = model_with({"requests": {"cpu": "8", "memory": "48Gi"}, "limits": {"memory": "64Gi"}}).spec_with_pod_memory(
        "32Gi"
    )
    assert spec["memory"] == spec["resources"]["requests"]["memory"] == "32Gi"
    assert spec["resources"]["limits"]["memory"] == "64Gi"  # still above the request


def test_a_limit_below_the_new_request_is_raised_and_absent_ones_stay_absent():
    raised = model_with({"requests": {"memory": "48Gi"}, "limits": {"memory": "48Gi"}}).spec_with_pod_memory("56Gi")
    assert raised["resources"] == {"requests": {"memory": "56Gi"}, "limits": {"memory": "56Gi"}}
    bare = model_with({"requests": {"cpu": "8"}}).spec_with_pod_memory("32Gi")
    assert bare["resources"] == {"requests": {"cpu": "8"}} and bare["memory"] == "32Gi"
    model = model_with({"requests": {"memory": "48Gi"}})
    model.spec_with_pod_memory("32Gi")
    assert model.spec["resources"]["requests"]["memory"] == "48Gi"  # the row itself is left as it was
