"""What a served model may be called: the gateway id ``namespace/modelName`` and its model name.

A model name is what Kubernetes labels and OpenAI clients carry unchanged: a name, or a Hugging Face
id (``organization/name``, as vLLM serves it), in ASCII letters, digits, ``.``, ``_`` and ``-``.
So no id differs from another only by a look-alike letter, a space or a zero-width character, none
walks a path (``../``), and none is longer than a client or a label shows. The namespace half is a
Kubernetes namespace name (DNS-1123 label). Whether a name spelled as an id (``team-a/idx`` in
``team-b``) may be served is the placement rules' and the catalog's to say
(``inference_gateway.placement``, ``inference_gateway.catalog``).
"""

from __future__ import annotations

import re
from typing import Any

_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
MODEL_NAME = re.compile(rf"(?:{_PART}/)?{_PART}")
NAMESPACE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
MODEL_NAME_RULE = ("must be a model name of ASCII letters, digits, '.', '_' and '-' (starting and ending with a "
                   "letter or digit, at most 96 characters, no '..'), optionally after one 'organization/' as in "
                   "a Hugging Face id")


def gateway_id(namespace: str, model_name: str) -> str:
    return f"{namespace}/{model_name}"


def model_name_refusal(model_name: Any) -> str | None:
    """Why ``model_name`` cannot be served under a gateway id (``MODEL_NAME_RULE``); None: it can."""
    if isinstance(model_name, str) and MODEL_NAME.fullmatch(model_name) and ".." not in model_name:
        return None
    return MODEL_NAME_RULE


def gateway_id_refusal(value: Any) -> str | None:
    """Why ``value`` is not a gateway id (a namespace name, ``/``, a model name); None: it is one."""
    namespace, _, model_name = value.partition("/") if isinstance(value, str) else ("", "", None)
    if not NAMESPACE.fullmatch(namespace):
        return "must start with a Kubernetes namespace name (lower-case letters, digits, '-'; at most 63) and '/'"
    refused = model_name_refusal(model_name)
    return None if refused is None else f"after '{namespace}/' {refused}"
