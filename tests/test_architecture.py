"""The project's import graph: no cycle anywhere, and ``clusters/``'s layers import one way only.

The graph comes from grimp (the library behind import-linter), which reads every module's source
with ``ast``: imports inside functions count as much as module-level ones, so a cycle cannot hide
in a function-local import. Imports under ``if TYPE_CHECKING:`` count too: a lower layer types a
higher one's classes by their Django base class instead. docs/architecture.md
describes the layers.
"""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent

# clusters/, top to bottom: each layer may import the ones below it, never one above.
CLUSTERS_LAYERS = (
    "web",
    "sync",
    "kube",
    "models",
    "validation",
    grimp.Layer("kinds", "controller_registry", "url_rules", "serving", "postgres_only"),
)


def project_packages() -> list[str]:
    """Every top-level package of the repository (a folder with ``__init__.py``), tests included."""
    return sorted(path.parent.name for path in ROOT.glob("*/__init__.py"))


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*project_packages(), exclude_type_checking_imports=False, cache_dir=None)


def test_the_graph_covers_the_project(graph: grimp.ImportGraph) -> None:
    """Guards the two tests below against passing on an empty or partial graph."""
    assert {"clusters", "inference_gateway", "scheduler", "tests"} <= set(project_packages())
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
    described = [
        f"{dependency.importer} imports {dependency.imported}: "
        + "; ".join(" -> ".join((", ".join(sorted(route.heads)), *route.middle, ", ".join(sorted(route.tails))))
                    for route in dependency.routes)
        for dependency in sorted(illegal, key=lambda dependency: (dependency.importer, dependency.imported))
    ]
    assert not illegal, "imports against clusters/' layers:\n" + "\n".join(described)
