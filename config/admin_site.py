"""The admin site with its navigation sidebar built and rendered once per distinct input, not on
every page.

Django's admin builds the list of apps and models a user may reach on every page (``each_context``
-> ``get_app_list``: a permission check per model and a ``reverse()`` per link, 2.6 ms for the 24
registered models) and renders it into the sidebar (``admin/app_list.html``, 3.8 ms): about a sixth
of a changelist page's CPU. Both are pure functions of a few inputs, and those inputs are what the
memos here are keyed on, so nothing is invalidated and nothing goes stale: a permission or group
change shows on the next page because the permission checks are still made on every request and
their answers are part of the key.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any
from urllib.parse import quote

from django import template
from django.contrib.admin import AdminSite
from django.contrib.admin.apps import AdminConfig
from django.http import HttpRequest
from django.template.base import Parser, Token
from django.template.context import Context
from django.urls import get_script_prefix, get_urlconf
from django.utils.functional import Promise
from django.utils.safestring import SafeString
from django.utils.translation import get_language

from common.lru import LeastRecentlyUsed

register = template.Library()  # {% load admin_nav %} (settings.TEMPLATES' libraries)

_KEPT = 256  # entries per memo: a handful of permission sets x languages in practice


class PortalAdminSite(AdminSite):
    """Django's admin site whose app list is built once per set of answers to its permission checks
    (and language, script prefix and URL configuration, which decide the names and links)."""

    def __init__(self, name: str = "admin") -> None:
        super().__init__(name)
        self._app_lists: LeastRecentlyUsed[Hashable, list[dict[str, Any]]] = LeastRecentlyUsed(_KEPT)

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[dict[str, Any]]:
        """``AdminSite.get_app_list``, from the memo where the same checks gave the same answers. The
        checks are the ones ``_build_app_dict`` makes (each admin's ``has_module_permission`` and
        ``get_model_perms``, overridden ones included); only the links and names are kept. A copy is
        returned: callers may change what they get."""
        answers = self._permission_answers(request, app_label)
        key = (app_label, get_language(), get_script_prefix(), get_urlconf(), answers)
        app_list = self._app_lists.get(key)
        if app_list is None:
            app_list = super().get_app_list(request, app_label)
            for entry in (*app_list, *(model for app in app_list for model in app["models"])):
                entry["name"] = str(entry["name"])  # read in this key's language; plain text is a cheap key
            self._app_lists.put(key, app_list)
        return [{**app, "models": [{**model, "perms": dict(model["perms"])} for model in app["models"]]}
                for app in app_list]  # fmt: skip

    def _permission_answers(self, request: HttpRequest, app_label: str | None) -> tuple[Hashable, ...]:
        """Each registered admin (of ``app_label``, where given) with its answers to the checks that
        decide whether and how its model is listed."""
        answers = []
        for model, model_admin in self._registry.items():
            if app_label and model._meta.app_label != app_label:
                continue
            allowed = model_admin.has_module_permission(request)
            perms = tuple(model_admin.get_model_perms(request).items()) if allowed else None
            answers.append((model, model_admin, allowed, perms))
        return tuple(answers)


class PortalAdminConfig(AdminConfig):
    """``django.contrib.admin`` with :class:`PortalAdminSite` as ``admin.site``."""

    default_site = "config.admin_site.PortalAdminSite"


_sidebars: LeastRecentlyUsed[Hashable, SafeString] = LeastRecentlyUsed(_KEPT)


class AppListNode(template.Node):
    """``{% include "admin/app_list.html" with app_list=available_apps show_changelinks=False %}``
    rendered once per distinct input. Django's template reads ``app_list``, ``show_changelinks``
    and, of the request, only whether each app's and model's link is part of its path (``in
    request.path|urlencode``, which marks the current app and model); those, the language and the
    template itself (a new one, where templates are not cached, is a new key) are the key."""

    template_name = "admin/app_list.html"

    def render(self, context: Context) -> SafeString:
        app_list = context.get("available_apps") or []
        path = quote(context["request"].path)  # the template's ``request.path|urlencode``
        links = [
            link for app in app_list for link in (app["app_url"], *(model["admin_url"] for model in app["models"]))
        ]
        found = context.template.engine.get_template(self.template_name)
        key = (found, get_language(), context.autoescape, _frozen(app_list),
               tuple(bool(link) and link in path for link in links))  # fmt: skip
        try:
            html = _sidebars.get(key)
        except TypeError:  # a value no key can hold (a site that adds its own to the list): not kept
            key = html = None
        if html is None:
            with context.push(app_list=app_list, show_changelinks=False):
                html = found.render(context)
            if key is not None:
                _sidebars.put(key, html)
        return html


@register.tag(name="nav_app_list")
def nav_app_list(parser: Parser, token: Token) -> AppListNode:
    return AppListNode()


def _frozen(value: Any) -> Hashable:
    """``value`` as a key: dicts and lists as tuples, lazy translations as the text they read now."""
    kind = type(value)
    if kind is dict:
        return tuple((name, item if type(item) in _PLAIN else _frozen(item)) for name, item in value.items())
    if kind is list or kind is tuple:
        return tuple(item if type(item) in _PLAIN else _frozen(item) for item in value)
    return str(value) if isinstance(value, Promise) else value


_PLAIN = frozenset({str, bool, int, type(None), type})  # keys as they are (a model is a ``type``)
