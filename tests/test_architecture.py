"""The project's import graph: no cycle anywhere, the apps in one layer order, and ``clusters/``'s and
``scheduler/``'s layers importing one way only.

The graph comes from grimp (the library behind import-linter), which reads every module's source
with ``ast``: imports inside functions count as much as module-level ones, so a cycle cannot hide
in a function-local import. Imports under ``if TYPE_CHECKING:`` count too: a lower layer types a
higher one's classes by their Django base class instead. docs/architecture.md
describes the layers.
"""

from __future__ import annotations

import re
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent

# The project's packages, top to bottom: a package may import the ones below it, never one above;
# the packages of one layer do not import each other. config/ mounts the apps (URL maps, settings);
# devstack (the live demo) runs every app, gitops' following too, since the demo runs no Celery beat;
# the leaf apps compose the others (gitops takes over the apply of rows run from Git through the
# registry clusters.change_routes, as the apps register their kinds); the gateway routes to the
# serving models and runs governance's hooks; every app builds on scheduler's, clusters' and
# accounts' parts; common/ knows none of them.
# Tests and benchmarks exercise every layer, so they stand outside it.
APP_LAYERS = (
    "config",
    "devstack",
    grimp.Layer("fleet", "gitops"),
    "inference_gateway",
    grimp.Layer("governance", "models_app"),
    "runs_app",
    "scheduler",
    "clusters",
    "accounts",
    "common",
)
OUTSIDE_THE_LAYERS = ("bench", "tests")


def test_every_package_has_a_place_in_the_layers() -> None:
    """A new top-level package has to be placed (else nothing would hold its imports)."""
    placed = {tail for layer in APP_LAYERS for tail in _tails(layer)} | set(OUTSIDE_THE_LAYERS)
    assert set(project_packages()) == placed


def test_apps_import_downwards_only(graph: grimp.ImportGraph) -> None:
    illegal = graph.find_illegal_dependencies_for_layers(layers=APP_LAYERS)
    assert not illegal, "imports against the apps' layers:\n" + "\n".join(_described(illegal))


def test_config_reaches_the_apps_through_urls_and_settings_only(graph: grimp.ImportGraph) -> None:
    """config/ (settings, URL map, entry points, Celery) mounts the apps: of an app it imports only
    a URL map (``<app>.urls``, ``accounts.sign_in_urls``, ...); of clusters only the declarations
    settings and request checks read (the two bottom layers: validation rules and limits, the
    registries); and anything of common/. The rest it names in settings strings."""
    declarations = ("clusters.validation", *(f"clusters.{tail}" for tail in _tails(CLUSTERS_LAYERS[-1])))
    reached = sorted(
        f"{importer} imports {imported}"
        for importer in {"config"} | graph.find_descendants("config")
        for imported in graph.find_modules_directly_imported_by(importer)
        if imported.split(".")[0] not in ("config", "common")
        and not imported.rpartition(".")[2].endswith("urls")
        and not any(imported == name or imported.startswith(name + ".") for name in declarations)
    )
    assert not reached, "config/ reaching past the apps' URL maps and declarations:\n" + "\n".join(reached)


def _tails(layer: str | grimp.Layer) -> set[str]:
    return set(layer.module_tails) if isinstance(layer, grimp.Layer) else {layer}


# clusters/, top to bottom: each layer may import the ones below it, never one above.
CLUSTERS_LAYERS = (
    "web",
    "sync",
    "kube",
    "models",
    "validation",
    grimp.Layer("kinds", "controller_registry", "change_routes", "url_rules", "serving", "postgres_only",
                "json_columns"),
)


def project_packages() -> list[str]:
    """Every top-level package of the repository (a folder with ``__init__.py``), tests included."""
    return sorted(path.parent.name for path in ROOT.glob("*/__init__.py"))


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*project_packages(), exclude_type_checking_imports=False, cache_dir=None)


def test_the_graph_covers_the_project(graph: grimp.ImportGraph) -> None:
    """Guards the two tests below against passing on an empty or partial graph."""
    assert {"clusters", "common", "config", "inference_gateway", "scheduler", "tests"} <= set(project_packages())
    assert "clusters.kube.client" in graph.modules
    assert graph.direct_import_exists(importer="clusters.sync.watcher", imported="clusters.kube.client")


def test_no_import_cycle(graph: grimp.ImportGraph) -> None:
    """An import a -> b is part of a cycle exactly when b reaches a again."""
    cycles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                cycles.append(" -> ".join((importer, *back)))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_clusters_layers_import_downwards_only(graph: grimp.ImportGraph) -> None:
    illegal = graph.find_illegal_dependencies_for_layers(layers=CLUSTERS_LAYERS, containers={"clusters"})
    assert not illegal, "imports against clusters/' layers:\n" + "\n".join(_described(illegal))


def _described(illegal: set[grimp.PackageDependency]) -> list[str]:
    """Each illegal dependency as ``importer imports imported: head -> ... -> tail``, one a line."""
    return [
        f"{dependency.importer} imports {dependency.imported}: "
        + "; ".join(" -> ".join((", ".join(sorted(route.heads)), *route.middle, ", ".join(sorted(route.tails))))
                    for route in dependency.routes)
        for dependency in sorted(illegal, key=lambda dependency: (dependency.importer, dependency.imported))
    ]


# scheduler/, by concern, top to bottom: its pages, API, face and Django's places may use every
# concern; right-sizing builds on the calculator; where models go (planning) and how much memory one
# needs (calculator) do not know each other, and both ask admission (who may have how much) about
# the pools' books; admission reads only the shared records every concern starts from. The docstring
# of each sub-package's __init__.py says what it decides.
SCHEDULER_LAYERS = (
    grimp.Layer("admin", "api", "apps", "forms", "management", "migrations", "public", "tasks", "templatetags",
                "urls", "views", independent=False),
    "rightsizing",
    grimp.Layer("planning", "calculator"),
    "admission",
    grimp.Layer("consumption", "durations", "holdings", "holdings_cache", "idle", "models", "nodes", "per_cluster",
                "pool_totals", "pools", "refresh", "savings", independent=False),
)


def test_scheduler_concerns_import_downwards_only(graph: grimp.ImportGraph) -> None:
    """Each module of scheduler/ sits in one of the layers (a new one has to be placed), and none
    imports a layer above its own or a sibling concern of its layer."""
    placed = {tail for layer in SCHEDULER_LAYERS for tail in _tails(layer)}
    unplaced = sorted(
        module for module in graph.find_children("scheduler") if module.removeprefix("scheduler.") not in placed
    )
    assert not unplaced, f"modules of scheduler/ in no layer of SCHEDULER_LAYERS: {unplaced}"
    illegal = graph.find_illegal_dependencies_for_layers(layers=SCHEDULER_LAYERS, containers={"scheduler"})
    assert not illegal, "imports against scheduler/'s layers:\n" + "\n".join(_described(illegal))


# The domain apps, each reached by the others through its public face only: ``<app>.public`` for
# functions and classes, its ``models`` modules for its tables (Django's own convention, for foreign
# keys and queries). clusters/ is the platform they build on: its layers above are its faces.
DOMAIN_APPS = ("accounts", "devstack", "fleet", "gitops", "governance", "inference_gateway", "models_app",
               "runs_app", "scheduler")


def is_face(module: str) -> bool:
    """``<app>.public``, or one of the app's ``models`` modules."""
    rest = module.partition(".")[2]
    return rest == "public" or rest == "models" or rest.endswith(".models")


def test_domain_apps_meet_through_their_public_faces(graph: grimp.ImportGraph) -> None:
    """An import from one app into another domain app names that app's face; tests, benchmarks and
    settings (``tests``, ``bench``, ``config``) may reach inside, as they exercise the parts."""
    importers = (*DOMAIN_APPS, "clusters")
    behind_a_face = sorted(
        f"{importer} imports {imported}"
        for importer in graph.modules if importer.split(".")[0] in importers
        for imported in graph.find_modules_directly_imported_by(importer)
        if imported.split(".")[0] in DOMAIN_APPS and imported.split(".")[0] != importer.split(".")[0]
        and not is_face(imported)
    )
    assert not behind_a_face, "imports past another app's public face:\n" + "\n".join(behind_a_face)


def test_every_domain_app_has_a_small_public_face() -> None:
    """A face lists what it offers (``__all__``) and offers only what other apps use."""
    for app in DOMAIN_APPS:
        path = ROOT / app / "public.py"
        if not path.exists():
            continue  # nothing of it is used by another app (fleet, devstack: pages and commands only)
        module = __import__(f"{app}.public", fromlist=["__all__"])
        assert sorted(module.__all__) == sorted(set(module.__all__)), app
        unused = [name for name in module.__all__ if not _used_outside(app, name)]
        assert not unused, f"{app}.public offers names no other app uses: {unused}"


def _used_outside(app: str, name: str) -> bool:
    """Whether a module outside ``app`` imports ``name`` from its face."""
    pattern = re.compile(rf"from {app}\.public import[^;]*?\b{re.escape(name)}\b", re.DOTALL)
    for path in ROOT.glob("*/**/*.py"):
        top = path.relative_to(ROOT).parts[0]
        if top == app or top in ("tests", "bench", ".venv"):
            continue
        if pattern.search(path.read_text()):
            return True
    return False
