"""Project-level checks: system checks, migrations in step, OpenAPI schema clean, demo data, metrics, admin."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from clusters.kinds import all_models
from clusters.models import Cluster
from models_app.models import InferenceModel


def test_system_checks_pass() -> None:
    call_command("check", "--fail-level", "WARNING")


@pytest.mark.django_db
def test_migrations_match_models() -> None:
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_openapi_schema_generates_without_warnings(tmp_path) -> None:
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert "/api/inferencemodels/" in (tmp_path / "schema.yaml").read_text()


@pytest.mark.django_db
def test_load_demo_twice_gives_the_same_rows() -> None:
    def snapshot() -> list[tuple]:
        rows = []
        for model in [*all_models(), apps.get_model("scheduler", "NodePool"), Cluster]:
            rows += [
                tuple(sorted((k, str(v)) for k, v in row.items() if k not in ("updated_at",)))
                for row in model.objects.values()
            ]
        return rows

    call_command("load_demo", stdout=io.StringIO())
    first = snapshot()
    call_command("load_demo", stdout=io.StringIO())
    assert snapshot() == first
    assert len(first) == 14 + 5 + 1  # samples, node pools (platform/demo/nodepools.yaml), the cluster


@pytest.mark.django_db
def test_metrics_export_mirrored_object_gauges(metrics_client) -> None:
    call_command("load_demo", stdout=io.StringIO())
    body = metrics_client.get("/metrics").content.decode()
    assert 'inference_portal_mirrored_objects{cluster="demo",kind="InferenceModel",sync_state="Synced"} 5.0' in body
    assert "inference_portal_django_http_requests_total_by_method_total" in body


@pytest.mark.django_db
def test_metrics_need_the_bearer_token(client, settings) -> None:
    call_command("load_demo", stdout=io.StringIO())
    assert client.get("/metrics").status_code == 401  # no token configured: closed to everyone
    settings.METRICS_TOKEN = "right"
    for header in ("", "Bearer wrong", "Token right", "right"):
        response = client.get("/metrics", HTTP_AUTHORIZATION=header)
        assert response.status_code == 401 and b"InferenceModel" not in response.content
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer right").status_code == 200


@pytest.mark.django_db
class TestAdmin:
    @pytest.fixture
    def staff_client(self, client):
        call_command("load_demo", stdout=io.StringIO())
        client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
        return client

    def test_every_changelist_change_and_add_page_renders(self, staff_client) -> None:
        for model in [*all_models(), Cluster, apps.get_model("scheduler", "NodePool")]:
            meta = model._meta
            assert staff_client.get(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")).status_code == 200
            assert staff_client.get(reverse(f"admin:{meta.app_label}_{meta.model_name}_add")).status_code == 200
            for obj in model.objects.all():
                url = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])
                assert staff_client.get(url).status_code == 200, url

    def test_changelist_filters_and_search(self, staff_client) -> None:
        url = reverse("admin:models_app_inferencemodel_changelist")
        body = staff_client.get(url, {"q": "mistral", "sync_state__exact": "Synced"}).content.decode()
        assert "mistral-7b" in body and "llama-2-70b" not in body

    def test_spec_is_edited_as_yaml_and_validated_at_the_field(self, staff_client) -> None:
        obj = InferenceModel.objects.get(name="llama-2-70b")
        url = reverse("admin:models_app_inferencemodel_change", args=[obj.pk])
        page = staff_client.get(url).content.decode()
        assert "memory: 80Gi" in page and "observedPeakMemory: 75Gi" in page
        spec_yaml = page.split('name="spec"')[1].split(">", 1)[1].split("</textarea>")[0]
        import html

        bad = html.unescape(spec_yaml).replace("memory: 80Gi", "memory: 80GB")
        response = staff_client.post(url, {"labels": "", "annotations": "", "spec": bad})
        assert response.status_code == 200
        assert "spec.memory: &quot;80GB&quot; is not a Kubernetes quantity such as 16Gi" in response.content.decode()
        assert InferenceModel.objects.get(pk=obj.pk).spec["memory"] == "80Gi"
        good = html.unescape(spec_yaml).replace("memory: 80Gi", "memory: 78Gi")
        form = {"labels": "team: ml", "annotations": "", "spec": good, "edit_version": obj.edit_version()}
        assert staff_client.post(url, form).status_code == 302
        saved = InferenceModel.objects.get(pk=obj.pk)
        assert saved.spec["memory"] == "78Gi" and saved.labels == {"team": "ml"}
        assert saved.memory_bytes == 78 * 1024**3

    def test_broken_yaml_is_reported_with_its_position(self, staff_client) -> None:
        obj = InferenceModel.objects.get(name="mistral-7b")
        url = reverse("admin:models_app_inferencemodel_change", args=[obj.pk])
        response = staff_client.post(url, {"labels": "", "annotations": "", "spec": "modelName: [x"})
        assert "spec: is not valid YAML at line 1, column 14" in response.content.decode()  # its subject, too

    def test_cluster_token_is_never_rendered(self, staff_client) -> None:
        cluster = Cluster.objects.create(name="prod", server_url="https://k8s:6443", bearer_token="t0ps3cret")
        page = staff_client.get(reverse("admin:clusters_cluster_change", args=[cluster.pk])).content.decode()
        assert "t0ps3cret" not in page


@pytest.mark.parametrize(
    ("environment", "refusal"),
    [
        ({}, "SECRET_KEY must be set"),
        ({"SECRET_KEY": "s" * 50}, "FIELD_ENCRYPTION_KEYS must be set"),
        ({"SECRET_KEY": "s" * 50, "FIELD_ENCRYPTION_KEYS": "k" * 40}, None),
    ],
)
def test_production_settings_require_the_keys(environment: dict[str, str], refusal: str | None) -> None:
    """Production never runs on the development keys (a fresh interpreter: settings load once)."""
    env = {key: value for key, value in os.environ.items() if key not in ("SECRET_KEY", "FIELD_ENCRYPTION_KEYS")}
    env.update(environment, DJANGO_SETTINGS_MODULE="config.settings.production")
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if refusal is None:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode != 0 and refusal in result.stderr


def test_the_demo_admin_keeps_its_password_and_sessions_across_runs(db, tmp_path, monkeypatch, client) -> None:
    """``make run`` runs ensure_demo_admin every time: the password must not rotate (it logged everyone out)."""
    import io

    from django.contrib.auth.models import User
    from django.core.management import call_command

    monkeypatch.delenv("DEMO_ADMIN_PASSWORD", raising=False)
    monkeypatch.setenv("DEMO_ADMIN_PASSWORD_FILE", str(tmp_path / "pw"))
    first, second = io.StringIO(), io.StringIO()
    call_command("ensure_demo_admin", stdout=first)
    client.force_login(User.objects.get(username="admin"))
    call_command("ensure_demo_admin", stdout=second)
    assert first.getvalue() == second.getvalue() and "password" in first.getvalue()
    assert (tmp_path / "pw").stat().st_mode & 0o777 == 0o600
    assert client.get("/").status_code == 200  # still logged in
