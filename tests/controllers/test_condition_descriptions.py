"""The CRDs say what the portal writes (issue 44): every condition type and reason its controllers
set on an InferenceModel or an InferenceRun is named in the ``status.conditions`` description of the
CRD the real API server serves (applied from platform/crds/), so ``kubectl explain`` tells a reader
what ``Failing``, ``Preempted`` or ``Borrowing`` mean."""

from __future__ import annotations

import kubernetes
import pytest

from clusters.kube.failures import _REFUSALS, FAILING
from models_app.controller import BORROWING_CONDITION, PREEMPTED_CONDITION, Reason
from runs_app.controller import CANCELLED, CONFIG_NOT_FOUND

MODEL_TYPES = {"Ready", "Available", FAILING, PREEMPTED_CONDITION, BORROWING_CONDITION}
MODEL_REASONS = {value for name, value in vars(Reason).items() if name.isupper()} | _REFUSALS | {
    "Recovered", "Reclaimed", "Readmitted", "BorrowedCapacity", "WithinGuarantee"}
RUN_TYPES = {"Ready", FAILING, CANCELLED, "JobDeleted"}
RUN_REASONS = {"Pending", "Running", "Succeeded", "Failed", CONFIG_NOT_FOUND, CANCELLED, "Recovered",
               "DeleteOnCompletion", "DeleteOnSuccess"} | _REFUSALS


def served_description(kube, crd: str) -> str:
    served = kube.api_client.sanitize_for_serialization(
        kubernetes.client.ApiextensionsV1Api(kube.api_client).read_custom_resource_definition(crd))
    schema = served["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema["properties"]["status"]["properties"]["conditions"]["description"]


@pytest.mark.parametrize(("crd", "types", "reasons"), [
    ("inferencemodels.inference.eh-ops.io", MODEL_TYPES, MODEL_REASONS),
    ("inferenceruns.ai.krateo.io", RUN_TYPES, RUN_REASONS),
])
def test_the_served_crd_names_every_condition_type_and_reason_the_portal_writes(kube, crd, types, reasons) -> None:
    description = served_description(kube, crd)
    words = set(description.replace(",", " ").replace(";", " ").replace("(", " ").replace(")", " ").replace(
        ":", " ").replace(".", " ").split())
    assert types - words == set(), f"{crd}: condition types not described"
    assert reasons - words == set(), f"{crd}: reasons not described"
