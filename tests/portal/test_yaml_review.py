"""YAML mode's "review changes" step: the field-path changes a save would make, checked by the
cluster with a server-side dry run (which sees what the portal cannot: here an admission policy
of the real control plane), or by the portal alone when the cluster has no API server to ask."""

from __future__ import annotations

import copy
import re

import pytest
import yaml
from django.test import Client
from kubernetes.client import AdmissionregistrationV1Api

from clusters.models import Cluster
from clusters.web.forms import to_yaml
from models_app.models import InferenceModel
from tests.accounts.conftest import store
from tests.clusters.conftest import sample_manifest, wait_for
from tests.conftest import ALL_KIND_PERMS
from tests.portal.test_pages import text

GOLD_IS_FULL = "the gold tier is full in this cluster"


def edited_yaml(model: InferenceModel, **labels: str) -> str:
    """The manifest the YAML page shows, with a new memory and ``labels`` added."""
    manifest = copy.deepcopy(model.to_manifest())  # to_manifest shares the row's spec
    manifest.pop("status", None)
    manifest["metadata"].pop("resourceVersion")
    manifest["metadata"]["labels"] = {**manifest["metadata"].get("labels", {}), **labels}
    manifest["spec"]["memory"] = "20Gi"
    return to_yaml(manifest)


@pytest.fixture
def gold_tier_policy(kube):
    """A ValidatingAdmissionPolicy (CEL, in kube-apiserver) refusing InferenceModels labelled
    ``tier: gold`` in the test's namespace: a rule the portal's CRD validation cannot know."""
    admission = AdmissionregistrationV1Api(kube.api_client)
    name = f"gold-tier-{kube.namespace}"
    admission.create_validating_admission_policy({
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["inference.eh-ops.io"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                "resources": ["inferencemodels"]}]},
            "validations": [{"expression": "!has(object.metadata.labels) || !('tier' in object.metadata.labels)"
                                           " || object.metadata.labels['tier'] != 'gold'",
                             "message": GOLD_IS_FULL}],
        },
    })
    admission.create_validating_admission_policy_binding({
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {
                     "kubernetes.io/metadata.name": kube.namespace}}}},
    })
    yield
    admission.delete_validating_admission_policy_binding(name)
    admission.delete_validating_admission_policy(name)


def test_the_dry_run_shows_a_refusal_only_the_cluster_knows_and_accepts_a_good_edit(
    kube, transactional_db, make_user, gold_tier_policy
) -> None:
    cluster = kube.register()
    kube.write(sample_manifest("inferencemodel-llama-2-7b.yaml", kube.namespace))
    kube.sync()
    model = InferenceModel.objects.get(cluster=cluster, name="llama-2-7b")
    browser = Client()
    browser.force_login(make_user("editor", perms=ALL_KIND_PERMS))
    url = f"/models/inferencemodels/{model.pk}/yaml/"
    form = {"cluster": cluster.name, "edit_version": model.edit_version(), "action": "review"}

    def review(manifest: str) -> str:
        return text(browser.post(url, {**form, "manifest": manifest}))

    # the policy takes effect a moment after it is made: ask until the cluster refuses
    gold = edited_yaml(model, tier="gold")

    def refused() -> str | None:
        page = review(gold)
        return page if 'id="review-refused"' in page else None

    page = wait_for(refused, timeout=15, message="the admission policy to refuse the dry run")
    assert GOLD_IS_FULL in page and "The cluster refuses this (server-side dry run)" in page
    silver = review(edited_yaml(model, tier="silver"))
    assert 'id="review-accepted"' in silver and "dryRun=All" in silver
    changes = silver.split('id="review-changes"')[1].split("</table>")[0]
    assert "<code>spec.memory</code>" in changes and "<pre>20Gi</pre>" in changes
    assert f"<pre>{model.spec['memory']}</pre>" in changes
    assert "<code>metadata.labels.tier</code>" in changes and "<em>(not set)</em>" in changes
    # a review saves nothing, neither in the portal nor in the cluster
    assert InferenceModel.objects.get(pk=model.pk).spec["memory"] == model.spec["memory"]
    assert "tier" not in (kube.read(InferenceModel.kube, "llama-2-7b")["metadata"].get("labels") or {})


def test_without_an_api_server_the_review_says_only_the_portal_checked(world) -> None:
    model = InferenceModel.objects.get(pk=world.objects[("InferenceModel", "vision")].pk)
    browser = world.browser("member")
    manifest = yaml.safe_load(edited_yaml(model, tier="gold"))
    del manifest["metadata"]["labels"]
    page = text(browser.post(f"/models/inferencemodels/{model.pk}/yaml/", {
        "cluster": world.cluster.name, "edit_version": model.edit_version(), "action": "review",
        "manifest": to_yaml(manifest)}))
    assert 'id="review-local"' in page and "Checked by the portal's own validation only: cluster east" in page
    assert "<code>spec.memory</code>" in page
    if model.labels:
        assert "<em>(removed)</em>" in page
    assert InferenceModel.objects.get(pk=model.pk).spec == model.spec


def test_a_review_of_invalid_yaml_lists_the_errors_and_no_changes(world) -> None:
    model = InferenceModel.objects.get(pk=world.objects[("InferenceModel", "vision")].pk)
    page = text(world.browser("member").post(f"/models/inferencemodels/{model.pk}/yaml/", {
        "cluster": world.cluster.name, "edit_version": model.edit_version(), "action": "review",
        "manifest": edited_yaml(model).replace("memory: 20Gi", "memory: lots")}))
    assert 'id="form-errors"' in page and "spec.memory" in page and 'id="yaml-review"' not in page


def test_the_yaml_page_carries_the_crd_schema_and_the_local_editor(world) -> None:
    model = InferenceModel.objects.get(pk=world.objects[("InferenceModel", "vision")].pk)
    page = text(world.browser("member").get(f"/models/inferencemodels/{model.pk}/yaml/"))
    assert 'data-yaml-editor="crd-schema"' in page and 'id="crd-schema"' in page
    assert "/static/editor/yaml-editor.js" in page and "modelName" in page
    assert all(src.startswith("/static/") for src in re.findall(r'<script src="([^"]+)"', page))  # nothing remote


def test_an_unreachable_cluster_falls_back_to_the_local_validation(make_user, db) -> None:
    cluster = Cluster.objects.create(name="gone", auth_method=Cluster.AuthMethod.TOKEN,
                                     server_url="https://127.0.0.1:9", bearer_token="t", request_timeout_seconds=2)
    model = store(cluster, sample_manifest("inferencemodel-llama-2-7b.yaml", "default"))
    browser = Client()
    browser.force_login(make_user("someone", perms=ALL_KIND_PERMS))
    page = text(browser.post(f"/models/inferencemodels/{model.pk}/yaml/", {
        "cluster": cluster.name, "edit_version": model.edit_version(), "action": "review",
        "manifest": edited_yaml(model)}))
    assert "Checked by the portal's own validation only: cluster gone could not be reached" in page
    assert "<code>spec.memory</code>" in page
