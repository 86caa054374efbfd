"""The schema the YAML editor completes from: the kind's CRD ``openAPIV3Schema`` (platform/crds/),
with the ``metadata`` fields a manifest sets (a CRD leaves ``metadata`` to the API server, so its
schema names none of them)."""

from __future__ import annotations

import copy
import functools
from typing import Any

from clusters.kinds import KindInfo
from clusters.validation.schemas import openapi_schema

METADATA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "The object's name, unique in its namespace."},
        "namespace": {"type": "string", "description": "The namespace; 'default' when left out."},
        "labels": {"type": "object", "description": "Labels (key: value) to select and group objects."},
        "annotations": {"type": "object", "description": "Annotations (key: value) for tools and people."},
    },
}


@functools.cache
def editor_schema(info: KindInfo) -> dict[str, Any]:
    schema = copy.deepcopy(openapi_schema(info))
    properties = schema.setdefault("properties", {})
    if not (properties.get("metadata") or {}).get("properties"):
        properties["metadata"] = METADATA
    properties["apiVersion"] = {**properties.get("apiVersion", {}), "enum": [info.api_version]}
    properties["kind"] = {**properties.get("kind", {}), "enum": [info.kind]}
    return schema
