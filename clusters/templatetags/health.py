"""``{% object_health obj as health %}``: the object's failure and whether a cluster is behind it."""

from __future__ import annotations

from typing import Any

from django import template

from clusters.kube import health

register = template.Library()


@register.simple_tag
def object_health(obj: Any) -> dict[str, Any]:
    return health.object_health(obj)
