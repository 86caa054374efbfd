"""``{% gateway_access obj %}``: how to call a serving model through the gateway, on its page.

Shows the model's gateway id (``namespace/modelName``) with ready-to-copy ``curl`` and ``openai``
snippets, or why the gateway does not route it (its ``backendUrl`` breaks a placement rule: an
object mirrored from a cluster is stored as it is, and only the gateway refuses it).
"""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.conf import settings

from inference_gateway.placement import Policy, route_refusal
from models_app.models import InferenceModel, ServingModel

register = template.Library()


def refusal_of(model: ServingModel) -> str | None:
    """Why the gateway does not route the model (the catalog asks the same rule); None: it routes it."""
    return route_refusal(Policy.load(model.cluster_id), model, isinstance(model, InferenceModel))


@register.inclusion_tag("inference_gateway/_model_gateway.html")
def gateway_access(model: Any) -> dict[str, Any]:
    if not isinstance(model, ServingModel) or not model.model_name:
        return {"shown": False}
    base = settings.GATEWAY_PUBLIC_URL.rstrip("/")
    body = json.dumps({"model": model.gateway_id, "messages": [{"role": "user", "content": "Hello"}]})
    curl = (f"curl {base}/v1/chat/completions \\\n  -H \"Authorization: Bearer $PORTAL_TOKEN\" \\\n"
            f"  -H \"Content-Type: application/json\" \\\n  -d '{body}'")
    python = ("import os\nfrom openai import OpenAI\n\n"
              f"client = OpenAI(base_url=\"{base}/v1\", api_key=os.environ[\"PORTAL_TOKEN\"])\n"
              f"answer = client.chat.completions.create(\n    model={json.dumps(model.gateway_id)},\n"
              "    messages=[{\"role\": \"user\", \"content\": \"Hello\"}],\n)\n"
              "print(answer.choices[0].message.content)")
    return {"shown": True, "gateway_id": model.gateway_id, "refusal": refusal_of(model), "curl": curl,
            "python": python, "model_name": model.model_name}
