"""Registry of mirrored kinds.

`clusters/` knows no concrete kind: each app registers its mirror models here (the way admin
classes register), and the sync engine, the apply endpoint and the demo loader look kinds up by
``apiVersion`` and ``kind`` instead of importing the apps.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Model

# The registry sits below the models (they register themselves here), so it types them by Django's
# base class: importing clusters.models, even for type hints, would close a circle through validation.


@dataclass(frozen=True)
class KindInfo:
    """Identity of one custom resource kind, declared once per model."""

    group: str
    version: str
    kind: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        """The CRD's metadata.name, also the file name of its schema in platform/crds/."""
        return f"{self.plural}.{self.group}"


def with_article(kind: str) -> str:
    """``an InferenceModel``, ``a Model``: the article a kind's name takes when spoken."""
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"


_models: dict[tuple[str, str], type[Model]] = {}


def register(model: type[Model]) -> type[Model]:
    """Class decorator: make a concrete KubeObject model known to the sync engine and API."""
    info = model.kube
    key = (info.api_version, info.kind)
    if key in _models and _models[key] is not model:
        raise RuntimeError(f"{info.api_version} {info.kind} is registered twice")
    _models[key] = model
    return model


def all_models() -> list[type[Model]]:
    """Every registered mirror model, in registration order."""
    return list(_models.values())


def model_for(api_version: str, kind: str) -> type[Model] | None:
    """The mirror model for an ``apiVersion``/``kind`` pair, or None when not mirrored."""
    return _models.get((api_version, kind))


def known_kinds() -> list[str]:
    """Human-readable list for error messages: ``kind (apiVersion)``."""
    return [f"{kind} ({api_version})" for api_version, kind in _models]
