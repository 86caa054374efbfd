"""The arrow runs one way: serving kinds (models_app) use the scheduler, the scheduler reads them
only through the kind registry, so adding a kind touches one model class and nothing here."""

from __future__ import annotations

import ast
from pathlib import Path

from django.conf import settings


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_scheduler_never_imports_the_serving_kinds():
    root = Path(settings.BASE_DIR) / "scheduler"
    offenders = {
        str(path.relative_to(root)): sorted(name for name in imported_modules(path) if name.startswith("models_app"))
        for path in root.rglob("*.py")
    }
    assert {path: names for path, names in offenders.items() if names} == {}
