"""KEDA's CRDs in the tests' control plane: taken from the pinned Go module by tools/keda/build.sh
(cached by go.sum's hash) and installed beside platform/crds, so the ScaledObjects the portal renders
are checked by KEDA's own schema with a server-side dry run (tests/models_app/test_keda.py)."""

from __future__ import annotations

from pathlib import Path

import kubernetes

from devstack.control_plane import ControlPlane, apply_crds
from devstack.go_tools import NO_GO, run_build
from tests.support.services import REPO_ROOT

BUILD_SCRIPT = REPO_ROOT / "tools" / "keda" / "build.sh"
SCALED_OBJECTS_CRD = "scaledobjects.keda.sh"


def keda_crd_dir() -> Path | None:
    """The folder of KEDA's CRD files; None where there is no Go toolchain to take them with (the
    test that needs them then skips, or fails under CI, saying so)."""
    result = run_build(BUILD_SCRIPT)
    if result.returncode == NO_GO:
        return None
    if result.returncode:
        raise RuntimeError(f"taking KEDA's CRDs failed:\n{result.stderr[-4000:]}")
    return result.path


def apply_test_crds(api_client: kubernetes.client.ApiClient) -> None:
    """The CRDs of platform/crds, then KEDA's where they can be had."""
    apply_crds(api_client)
    keda = keda_crd_dir()
    if keda is not None:
        apply_crds(api_client, keda)


def apply_test_crds_to(plane: ControlPlane) -> None:
    with plane.api_client() as api_client:
        apply_test_crds(api_client)
