"""The admin's navigation sidebar, built and rendered once per distinct input (config.admin_site),
is the sidebar Django writes on every page, for every user, and follows permission and group changes
on the very next page: the permission checks are made on each request and their answers key the memo."""

from __future__ import annotations

import re
from pathlib import Path

import django.contrib.admin
import pytest
from django.contrib import admin
from django.contrib.admin import AdminSite
from django.contrib.auth.models import Group, Permission, User
from django.template import engines

from config import admin_site

pytestmark = pytest.mark.django_db

CSRF = re.compile(r'name="csrfmiddlewaretoken" value="[^"]+"')
SIDEBAR = re.compile(r'<nav class="sticky" id="nav-sidebar".*?</nav>', re.S)
OURS = Path(__file__).resolve().parents[2] / "templates" / "admin" / "nav_sidebar.html"
DJANGOS = Path(django.contrib.admin.__file__).parent / "templates" / "admin" / "nav_sidebar.html"
DJANGOS_INCLUDE = "{% include 'admin/app_list.html' with app_list=available_apps show_changelinks=False %}"
PAGES = [
    "/admin/",
    "/admin/models_app/",
    "/admin/models_app/inferencemodel/",
    "/admin/models_app/inferencemodel/?node_pool__exact=gpu-a",
    "/admin/clusters/cluster/",
    "/admin/auth/user/",
]


def test_the_sidebar_template_is_djangos_with_its_app_list_memoized():
    """Ours is Django's ``nav_sidebar.html`` but for the tag that stands for its ``include``: a
    Django upgrade that changes the sidebar fails here until ours follows."""
    ours = OURS.read_text().replace("{% load i18n admin_nav %}", "{% load i18n %}")
    assert ours.replace("{% nav_app_list %}", DJANGOS_INCLUDE) == DJANGOS.read_text()


def _page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return CSRF.sub("", response.content.decode())


def _djangos_own(monkeypatch) -> None:
    """Every page from here on built and rendered as Django does: its app list, a plain include."""
    monkeypatch.setattr(admin_site.PortalAdminSite, "get_app_list", AdminSite.get_app_list)
    include = engines["django"].engine.from_string(DJANGOS_INCLUDE)
    monkeypatch.setattr(admin_site.AppListNode, "render", lambda node, context: include.render(context))


@pytest.mark.parametrize("who", ["superuser", "viewer", "editor_by_group"])
def test_every_page_has_the_sidebar_django_writes(client, make_user, monkeypatch, who):
    if who == "superuser":
        user = User.objects.create_superuser("nav-admin", email="", password=None)
    elif who == "viewer":
        user = make_user("nav-viewer", perms=["models_app.view_inferencemodel", "clusters.view_cluster"], staff=True)
    else:
        user = make_user("nav-editor", staff=True)
        editors = Group.objects.create(name="nav-editors")
        editors.permissions.set(Permission.objects.filter(content_type__app_label="models_app"))
        user.groups.add(editors)
    client.force_login(user)
    reachable = {"superuser": "/admin/", "viewer": "/admin/[mc]", "editor_by_group": "/admin/models_app/"}[who]
    ours = {url: _page(client, url) for url in PAGES if re.match(reachable, url)}
    again = {url: _page(client, url) for url in ours}  # from the memo this time
    _djangos_own(monkeypatch)
    theirs = {url: _page(client, url) for url in ours}
    assert ours == again == theirs
    lists = [page for url, page in ours.items() if url.count("/") > 3]  # the indexes have no sidebar
    assert lists and all(SIDEBAR.search(page) for page in lists)


def _sidebar(client, url: str = "/admin/models_app/inferencemodel/") -> str:
    return SIDEBAR.search(_page(client, url)).group(0)


def test_a_permission_or_group_change_shows_on_the_next_page(client, make_user):
    user = make_user("nav-changing", perms=["models_app.view_inferencemodel"], staff=True)
    client.force_login(user)
    clusters_link, add_link = 'href="/admin/clusters/cluster/"', 'href="/admin/models_app/inferencemodel/add/"'
    assert clusters_link not in _sidebar(client)
    operators = Group.objects.create(name="nav-operators")
    operators.permissions.add(Permission.objects.get(codename="view_cluster"))
    user.groups.add(operators)
    assert clusters_link in _sidebar(client)
    operators.permissions.clear()  # the group stays, its permission goes
    assert clusters_link not in _sidebar(client)
    assert add_link not in _sidebar(client)
    user.user_permissions.add(Permission.objects.get(codename="add_inferencemodel"))
    assert add_link in _sidebar(client)
    User.objects.filter(pk=user.pk).update(is_superuser=True)
    assert 'href="/admin/auth/user/"' in _sidebar(client)


def test_the_current_model_is_marked_on_its_own_pages_only(client):
    client.force_login(User.objects.create_superuser("nav-current", email="", password=None))
    current = re.compile(r'<tr class="model-(\w+) current-model">')
    assert current.findall(_sidebar(client)) == ["inferencemodel"]
    assert current.findall(_sidebar(client, "/admin/clusters/cluster/")) == ["cluster"]
    assert current.findall(_sidebar(client, "/admin/auth/user/")) == ["user"]
    assert current.findall(_sidebar(client)) == ["inferencemodel"]


def test_what_the_site_returns_may_be_changed_by_its_caller(rf):
    """Each call gets its own copy of the remembered list."""
    request = rf.get("/admin/")
    request.user = User.objects.create_superuser("nav-copy", email="", password=None)
    first = admin.site.get_app_list(request)
    first[0]["models"].clear()
    first[0]["name"] = "changed"
    second = admin.site.get_app_list(request)
    assert second[0]["models"] and second[0]["name"] != "changed"
    assert second == AdminSite.get_app_list(admin.site, request)


def test_a_list_with_values_no_key_can_hold_is_rendered_each_time(client, monkeypatch):
    """A site that adds its own values to the list (here a set) still gets Django's sidebar."""
    client.force_login(User.objects.create_superuser("nav-odd", email="", password=None))
    remembered = admin_site.PortalAdminSite.get_app_list

    def with_sets(site, request, app_label=None):
        app_list = remembered(site, request, app_label)
        for app in app_list:
            app["tags"] = {app["app_label"]}
        return app_list

    monkeypatch.setattr(admin_site.PortalAdminSite, "get_app_list", with_sets)
    ours = [_sidebar(client), _sidebar(client)]
    _djangos_own(monkeypatch)
    assert ours == [_sidebar(client)] * 2
