"""The YAML editor's cursor logic (assets/src/yaml_paths.js), by Node's own test runner."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ASSETS = Path(__file__).resolve().parents[2] / "assets"


def test_the_editors_path_logic_passes_its_node_tests() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed (Debian's nodejs); the browser tests still cover the editor")
    result = subprocess.run([node, "--test", "test/"], cwd=ASSETS, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "# fail 0" in result.stdout and "# pass 3" in result.stdout
