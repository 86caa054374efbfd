"""Hostile values through every write path (hypothesis): never a 5xx, and nothing stored fails validation.

Write paths: the API's create, PUT and PATCH of each kind, ``/api/apply/`` as JSON and as YAML, the
portal's form and YAML mode (serving kinds) and the admin's add form (every kind). Each example
takes a reference sample and puts one to three hostile values (NUL, lone surrogates, trailing
newlines, int32/int64 edges, huge quantities, long strings, deep nesting, non-JSON YAML...) at
paths of the manifest, or posts raw text to the parsers. Bounded (``EXAMPLES``, derandomized) so
the suite stays fast; the figures are printed (``pytest -s``).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

import pytest
import yaml
from django.test import Client
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from clusters.kinds import all_models, model_for
from clusters.models import Cluster
from clusters.validation.manifests import ManifestInvalid, validate_manifest
from clusters.web.forms import to_yaml
from models_app.forms import InferenceModelPageForm, KubeAIModelPageForm, ModelServicePageForm
from tests.accounts.conftest import SAMPLE_FILES, SAMPLES, store
from tests.conftest import ENDPOINTS

EXAMPLES = 700
RAW_EXAMPLES = 120

PAGE_FORMS = {
    "InferenceModel": InferenceModelPageForm,
    "Model": KubeAIModelPageForm,
    "ModelService": ModelServicePageForm,
}
PAGE_SLUGS = {"InferenceModel": "inferencemodels", "Model": "kubeai-models", "ModelService": "modelservices"}
PATHS = ("api-create", "api-put", "api-patch", "apply-json", "apply-yaml", "portal-form", "portal-yaml", "admin")


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


HOSTILE = [
    "a\x00b",
    "\ud800",
    "name\n",
    "m" * 300,
    "p" * 70,
    "x" * 5000,
    "99999999999999999999Ti",
    "99999999999",
    "16GB",
    "",
    "2024-01-01",
    "-1",
    2**31 - 1,
    2**31,
    2**63 - 1,
    2**63,
    -(2**63) - 1,
    99999999999999999999,
    -1,
    0,
    1e308,
    1.5,
    True,
    None,
    {},
    [],
    {"\x00": "x"},
    {"k": "v\x00"},
    _nested(95),
    _nested(101),
    _nested(200),  # beyond every limit, yet shallow enough for the client side (deepcopy, json.dumps) to build
]
VALUES = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(max_size=40),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.text(max_size=8), max_size=3),
    st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
)
# Raw bodies for the parsers: YAML that is not JSON, bombs, deep nesting, garbage.
RAW_BODIES = st.one_of(
    st.sampled_from(
        [
            "a: 2024-01-01",
            "a: !!binary aGk=",
            "a: !!set {x}",
            "a: .nan",
            "a: .inf",
            "1: x",
            "? [a]\n: b",
            "a: &a [*a]",
            "a: &a [x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b]\n"
            "d: &d [*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e]",
            "[" * 50_000 + "]" * 50_000,
            "{" * 5_000,
            '{"a": 1e999}',
            "[NaN]",
        ]
    ),
    st.text(max_size=200),
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a manifest's metadata and spec, plus new keys beside the existing ones."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        found += [(*prefix, "fuzzed-key")] if prefix else []
        for key, child in value.items():
            if prefix or key in ("metadata", "spec"):
                found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


KIND_PATHS = {
    kind: [
        *_paths(SAMPLES[file_name]),
        ("metadata", "labels", "team"),
        ("metadata", "annotations", "note"),
        ("metadata", "namespace"),
    ]
    for kind, file_name in SAMPLE_FILES.items()
}


def _put(manifest: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    """Set ``value`` at ``path``, making objects on the way; a path through something else is skipped."""
    parent: Any = manifest
    for key in path[:-1]:
        if isinstance(parent, list):
            if not (isinstance(key, int) and key < len(parent)):
                return
            parent = parent[key]
        else:
            if not isinstance(parent.get(key), dict | list):
                parent[key] = {}
            parent = parent[key]
    if isinstance(parent, dict) or (isinstance(path[-1], int) and path[-1] < len(parent)):
        parent[path[-1]] = value


@st.composite
def cases(draw) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """(write path, kind, mutated manifest, the mutation as a merge patch)."""
    path_name = draw(st.sampled_from(PATHS))
    kinds = sorted(PAGE_FORMS) if path_name.startswith("portal") else sorted(SAMPLE_FILES)
    kind = draw(st.sampled_from(kinds))
    manifest = copy.deepcopy(SAMPLES[SAMPLE_FILES[kind]])
    manifest["metadata"]["name"] = draw(st.from_regex(r"[a-z]{12}", fullmatch=True))
    patch: dict[str, Any] = {}
    for _ in range(draw(st.integers(1, 3))):
        where, value = draw(st.sampled_from(KIND_PATHS[kind])), draw(VALUES)
        _put(manifest, where, copy.deepcopy(value))  # HOSTILE's objects are shared by every example
        if not any(isinstance(key, int) for key in where):
            _put(patch, where, copy.deepcopy(value))
    return path_name, kind, manifest, patch


def _yaml(value: Any) -> str:
    """Block YAML when PyYAML can write it, else JSON (which YAML reads too)."""
    try:
        return to_yaml(value)
    except (yaml.YAMLError, UnicodeEncodeError):
        return json.dumps(value)


def _page_form_data(kind: str, manifest: dict[str, Any]) -> dict[str, Any]:
    form = PAGE_FORMS[kind]
    spec = copy.deepcopy(manifest.get("spec")) if isinstance(manifest.get("spec"), dict) else {}
    metadata = manifest["metadata"] if isinstance(manifest.get("metadata"), dict) else {}
    data: dict[str, Any] = {"cluster": "fuzz", "namespace": metadata.get("namespace", "default")}
    data.update(name=metadata.get("name", ""), labels=_yaml(metadata.get("labels") or {}))
    for field, path in form.spec_fields.items():
        parent, value = spec, None
        for key in path:
            value = parent.pop(key, None) if key == path[-1] and isinstance(parent, dict) else parent.get(key, {})
            parent = value if isinstance(value, dict) else {}
        if value is not None:
            data[field] = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    data["more_spec"] = _yaml(spec)
    return data


class WritePaths:
    """Sends one manifest through one write path and returns the status code."""

    def __init__(self, cluster: Cluster, api: APIClient, browser: Client) -> None:
        self.cluster, self.api, self.browser = cluster, api, browser
        self.existing = {kind: store(cluster, copy.deepcopy(SAMPLES[name])) for kind, name in SAMPLE_FILES.items()}

    def send(self, path_name: str, kind: str, manifest: dict[str, Any], patch: dict[str, Any]) -> int:
        endpoint, existing = ENDPOINTS[kind], self.existing[kind]
        if path_name == "api-create":
            return self._json("post", endpoint, manifest)
        if path_name == "api-put":
            if isinstance(manifest["metadata"], dict):  # a copy of the current object, as GET gave it
                existing.refresh_from_db()
                manifest["metadata"] = {**manifest["metadata"], "name": existing.name,
                                        "resourceVersion": existing.edit_version()}
            return self._json("put", f"{endpoint}{existing.pk}/", manifest)
        if path_name == "api-patch":
            return self._json("patch", f"{endpoint}{existing.pk}/", patch)
        if path_name == "apply-json":
            return self._json("post", "/api/apply/?cluster=fuzz", [manifest])
        if path_name == "apply-yaml":
            body = _yaml(manifest).encode("utf-8", "surrogatepass")
            return self.api.post("/api/apply/?cluster=fuzz", body, content_type="application/yaml").status_code
        if path_name == "portal-yaml":
            data = {"cluster": "fuzz", "manifest": _yaml(manifest)}
            return self._form(f"/models/{PAGE_SLUGS[kind]}/new/yaml/", data)
        if path_name == "portal-form":
            return self._form(f"/models/{PAGE_SLUGS[kind]}/new/", _page_form_data(kind, manifest))
        model = model_for(manifest["apiVersion"], manifest["kind"])
        metadata = manifest["metadata"] if isinstance(manifest["metadata"], dict) else {}
        data = {"cluster": self.cluster.pk, "namespace": str(metadata.get("namespace", "default"))}
        data.update(name=str(metadata.get("name", "")), spec=_yaml(manifest.get("spec")))
        data.update(labels=_yaml(metadata.get("labels")), annotations=_yaml(metadata.get("annotations")))
        return self._form(f"/admin/{model._meta.app_label}/{model._meta.model_name}/add/", data)

    def _json(self, method: str, url: str, body: Any) -> int:
        text = json.dumps(body)  # ASCII: lone surrogates travel as \\ud800 escapes, as a client would send them
        return getattr(self.api, method)(url, text, content_type="application/json").status_code

    def _form(self, url: str, data: dict[str, Any]) -> int:
        try:
            return self.browser.post(url, data).status_code
        except UnicodeEncodeError:  # a lone surrogate cannot be sent in a form; no browser would
            return 0


def stored_invalid() -> list[str]:
    """Every stored row whose manifest the validator refuses now."""
    refused = []
    for model in all_models():
        for row in model.objects.all():
            manifest = row.to_manifest()
            manifest.pop("status", None)
            try:
                validate_manifest(model, manifest)
            except ManifestInvalid as invalid:
                refused.append(f"{model.kube.kind} {row.name}: {invalid}")
    return refused


def fuzz_settings(max_examples: int) -> settings:
    return settings(
        max_examples=max_examples,
        deadline=None,
    database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )


@pytest.mark.django_db
def test_no_write_path_answers_5xx_or_stores_what_validation_refuses(make_user) -> None:
    cluster = Cluster.objects.create(name="fuzz", auth_method=Cluster.AuthMethod.SNAPSHOT)
    admin = make_user("fuzz-admin", staff=True)
    admin.is_superuser = True
    admin.save()
    # A crash is counted as the 500 a real client would get, so one run reports all of them.
    api, browser = APIClient(raise_request_exception=False), Client(raise_request_exception=False)
    api.force_authenticate(admin)
    browser.force_login(admin)
    paths = WritePaths(cluster, api, browser)
    codes: Counter[tuple[str, int]] = Counter()
    server_errors: list[str] = []

    @fuzz_settings(EXAMPLES)
    @given(case=cases())
    def manifests(case) -> None:
        path_name, kind, manifest, patch = case
        code = paths.send(path_name, kind, manifest, patch)
        codes[path_name, code] += 1
        if code >= 500:
            server_errors.append(f"{path_name} {kind} {json.dumps(manifest)[:300]}")

    @fuzz_settings(RAW_EXAMPLES)
    @given(body=RAW_BODIES, content_type=st.sampled_from(["application/yaml", "application/json"]))
    def raw_bodies(body: str, content_type: str) -> None:
        code = api.post("/api/apply/?cluster=fuzz", body.encode("utf-8", "surrogatepass"), content_type=content_type)
        codes["apply-raw", code.status_code] += 1
        if code.status_code >= 500:
            server_errors.append(f"apply-raw {content_type} {body[:300]!r}")

    # every path stores a valid manifest (so a path that refused everything would fail here); the
    # fuzzed inputs below are mostly invalid, and which paths they happen to reach shifts with the data
    for path_name in PATHS:
        manifest = copy.deepcopy(SAMPLES[SAMPLE_FILES["InferenceModel"]])
        manifest["metadata"]["name"] = f"valid-{path_name}"
        # its own gateway id too: the sample already stored serves the sample's model name, so a
        # copy of it is refused (rightly) wherever it is created, and the path stored nothing
        manifest["spec"]["modelName"] = f"valid-{path_name}"
        codes[path_name, paths.send(path_name, "InferenceModel", manifest, {"metadata": {"labels": {"a": "b"}}})] += 1
    manifests()
    raw_bodies()
    refused = stored_invalid()
    tried = sum(count for (_, code), count in codes.items() if code)
    print(f"\nwrite-path fuzz: {tried} inputs, {len(server_errors)} 5xx, {len(refused)} stored rows invalid")
    print("by path and status:", dict(sorted(codes.items())))
    assert tried >= EXAMPLES, codes
    assert {path for path, code in codes if code in (200, 201, 302)} >= set(PATHS), codes  # every path stores
    assert not server_errors, "\n".join(server_errors[:10])
    assert not refused, "\n".join(refused[:10])
