"""``{% gitops_panel obj %}``: on an object's page, where it is run from Git, its pending pull
requests (number, link, diff) and its drift; nothing in direct mode. Included by portal/_sync.html."""

from __future__ import annotations

from typing import Any

from django import template

from clusters.models import KubeObject
from gitops.route import GitRoute

register = template.Library()


@register.inclusion_tag("gitops/_panel.html")
def gitops_panel(obj: KubeObject) -> dict[str, Any]:
    return {"gitops": GitRoute().describe(obj)}
