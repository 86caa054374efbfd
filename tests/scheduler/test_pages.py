"""The planning and calculator pages: login required, server-rendered, chart inline SVG."""

from __future__ import annotations

import yaml
from django import forms
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster
from scheduler.forms import PlanForm
from tests.scheduler.conftest import make_model, make_pool
from tests.support.html_forms import form_fields


def logged_in(make_user) -> Client:
    client = Client()
    client.force_login(make_user("page-user"))
    return client


def test_pages_need_a_login(db):
    for url in ("/planning/", "/calculator/"):
        response = Client().get(url)
        assert response.status_code == 302 and "/login/" in response["Location"]


def test_planning_page_shows_accounts_chart_and_a_plan(make_user, cluster, gpu_pool):
    make_model(cluster, "resident", "40Gi", peak="30Gi")
    client = logged_in(make_user)

    page = client.get("/planning/").content.decode()
    assert "<svg" in page and "budget vs allocated vs observed" in page
    assert "prod/gpu" in page and "default/resident (40.0 GiB)" in page

    models = yaml.safe_dump([{"manifest": {
        "apiVersion": "inference.eh-ops.io/v1alpha1", "kind": "InferenceModel", "metadata": {"name": "huge"},
        "spec": {"modelName": "huge", "memory": "90Gi", "backendUrl": "http://huge:8000",
                 "nodeSelector": {"inference-pool": "gpu"}},
    }}])  # fmt: skip
    result = client.post("/planning/", {"cluster": "prod", "models": models, "include_running": "on"}).content.decode()
    assert "does not fit" in result and "InferenceModel default/huge" in result
    assert "larger than any node: memory: needs 90.0Gi; the pool&#x27;s biggest node has 64.0Gi allocatable" in result

    bad = client.post("/planning/", {"cluster": "prod", "models": "- {kind: InferenceModel, id: 424242}"})
    assert "models[0].id: 424242 is not the id of an InferenceModel in cluster prod" in bad.content.decode()


def test_calculator_page_shows_every_term(make_user, db):
    client = logged_in(make_user)
    form = {"parameters": "7e9", "dtype": "bf16", "layers": 32, "kv_heads": 32, "head_dim": 128,
            "context_length": 4096, "concurrent_sequences": 1, "kv_dtype": "same", "cuda_context": "621Mi",
            "gpu_memory": "24Gi", "gpu_utilization": 0.9}  # fmt: skip
    page = client.post("/calculator/", form).content.decode()
    assert "7,000,000,000 parameters x 2 bytes (bf16)" in page and "<td>2.0 GiB</td>" in page  # the KV cache
    for term in ("activations", "logits", "cuda_context", "(attention mask)", "last position only"):
        assert term in page
    assert "<code>16Gi</code>" in page
    bad = client.post("/calculator/", {**form, "cuda_context": "lots"}).content.decode()
    assert "cuda_context: &#x27;lots&#x27; is not a non-negative Kubernetes quantity" in bad


def test_a_preset_chosen_in_the_form_is_what_calculate_computes(make_user, db):
    """The form's own preset field, chosen on a page opened without one: the 7B defaults the page
    showed give way to the preset's architecture; a field the user changed still wins."""
    client = logged_in(make_user)
    fields = form_fields(client.get("/calculator/").content.decode().split('id="calculator"')[1])
    assert fields["parameters"] == "7B"
    chosen = {**fields, "preset": "llama-3.1-70b-instruct"}
    result = client.post("/calculator/", chosen).context["answer"]
    terms = {term.name: term for term in result.estimate.terms}
    assert terms["weights"].bytes == 2 * 70553706496
    assert terms["kv_cache"].bytes == 2 * 8 * 128 * 80 * 2 * 4096
    assert "80 full-attention layers" in terms["kv_cache"].formula
    changed = client.post("/calculator/", {**chosen, "layers": 40}).context["answer"]
    assert "40 full-attention layers" in next(t.formula for t in changed.estimate.terms if t.name == "kv_cache")


def test_a_plan_shows_the_pools_of_the_planned_cluster(make_user, cluster, gpu_pool):
    """Under a plan the accounts are the planned cluster's: another cluster's pools and holders are
    left to the page without a plan (a link to every cluster)."""
    other = Cluster.objects.create(name="elsewhere", server_url="https://10.0.0.9:6443")
    make_pool(other, "cpu", budget="10Gi")
    make_model(cluster, "resident", "40Gi")
    make_model(other, "neighbour", "4Gi", pool="cpu")
    client = logged_in(make_user)
    assert "elsewhere/cpu" in client.get("/planning/").content.decode()
    models = "- estimate: {name: small, namespace: default, pool: gpu, memory: 1Gi}"
    result = client.post("/planning/", {"cluster": "prod", "models": models, "include_running": "on"})
    page = result.content.decode()
    assert result.status_code == 200 and "prod/gpu" in page and "default/resident (40.0 GiB)" in page
    assert "elsewhere/cpu" not in page and "neighbour" not in page
    assert 'id="all-clusters"' in page and [a.cluster_name for a in result.context["accounts"]] == ["prod"]


def test_a_what_if_looks_its_cluster_up_once_and_only_among_the_users(make_user, cluster, gpu_pool):
    """The form's cluster field finds the cluster among those the user may plan on and the API's
    serializer takes that Cluster as it is; a POST does not look up the first cluster for an
    initial value that its bound form never shows. A name outside the user's clusters is still
    refused, by the page and by the API."""
    Cluster.objects.create(name="hidden", server_url="https://10.0.0.9:6443")
    client = logged_in(make_user)
    models = "- estimate: {name: small, namespace: default, pool: gpu, memory: 1Gi}"
    with CaptureQueriesContext(connection) as queries:
        result = client.post("/planning/", {"cluster": "prod", "models": models, "include_running": "on"})
    assert result.status_code == 200 and 'id="plan"' in result.content.decode()
    table = Cluster._meta.db_table
    by_name = [q["sql"] for q in queries.captured_queries if q["sql"].startswith(f'SELECT "{table}"."id"')
               and f'"{table}"."name" = ' in q["sql"]]  # fmt: skip
    first = [q["sql"] for q in queries.captured_queries if f'FROM "{table}" ORDER BY "{table}"."name" ASC LIMIT 1'
             in q["sql"]]  # fmt: skip
    assert (len(by_name), first) == (1, [])
    member = Client()
    member.force_login(make_user("no-grants", teams=[]))
    refused = member.post("/planning/", {"cluster": "prod", "models": models, "include_running": "on"})
    assert 'id="plan"' not in refused.content.decode() and "Select a valid choice" in refused.content.decode()
    api = member.post("/api/planning/plan/", {"cluster": "prod", "models": [{"estimate": {
        "name": "small", "namespace": "default", "pool": "gpu", "memory": "1Gi"}}]}, content_type="application/json")
    assert api.status_code == 400 and "cluster" in api.json()


def test_the_cluster_choices_render_as_djangos_model_choice_field_renders_them(cluster):
    """PlanForm offers clusters by name (scheduler.forms.ClusterChoiceField, read as names): the
    form's HTML is a plain ModelChoiceField's, byte for byte, unbound, with an initial cluster,
    bound to a valid or an unknown name, limited to some clusters, names escaped."""
    Cluster.objects.create(name="b<&>", server_url="https://10.0.0.9:6443")
    Cluster.objects.create(name="another", server_url="https://10.0.0.8:6443")

    class Plain(PlanForm):
        cluster = forms.ModelChoiceField(queryset=Cluster.objects.all(), to_field_name="name")

    models = "- estimate: {name: small, namespace: default, pool: gpu, memory: 1Gi}"
    cases = [
        {}, {"initial": {"cluster": "another"}},
        {"data": {"cluster": "prod", "models": models, "include_running": "on"}},
        {"data": {"cluster": "b<&>", "models": models}},
        {"data": {"cluster": "nowhere", "models": models}},
        {"data": {"cluster": "another", "models": models}, "clusters": Cluster.objects.exclude(name="another")},
    ]  # fmt: skip
    for case in cases:
        ours, django_s = PlanForm(**case), Plain(**case)
        assert ours.is_bound is django_s.is_bound
        if ours.is_bound:
            assert ours.is_valid() == django_s.is_valid()
        assert ours.as_p() == django_s.as_p(), case
        assert str(ours["cluster"]).count("<option") == 1 + len(case.get("clusters", Cluster.objects.all()))
