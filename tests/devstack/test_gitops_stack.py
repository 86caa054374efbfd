"""The GitOps stack of issue 45 end to end, with the real things: a commit and a merged pull
request in Gitea reach the control plane through Flux's source and kustomize controllers; a pull
request still open does not. What the portal's GitOps mode builds on (tests/support/gitops.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from django.conf import settings

from devstack.control_plane import ControlPlane
from devstack.gitops_demo import start_gitops_demo
from tests.support.clusters import KubeCluster
from tests.support.gitops import GitOpsRepo


def config_map(namespace: str, name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": data}


def config_map_data(kube: KubeCluster, name: str) -> dict | None:
    found = kube.get("v1", "ConfigMap", name)
    return None if found is None else found["data"]


def test_a_merged_pull_request_reaches_the_cluster_and_an_open_one_does_not(
        gitops_repo: GitOpsRepo, kube: KubeCluster) -> None:
    # a commit on main: Flux applies it
    first = gitops_repo.commit(config_map(kube.namespace, "settings", mode="git"), "settings: git mode")
    gitops_repo.wait_applied(first)
    assert config_map_data(kube, "settings") == {"mode": "git"}

    # an InferenceModel through a pull request, opened and merged through Gitea's API
    model = yaml.safe_load((Path(settings.SAMPLES_DIR) / "inferencemodel-mistral-7b.yaml").read_text())
    model["metadata"]["namespace"] = kube.namespace
    gitops_repo.commit(model, "mistral-7b: deploy", new_branch="deploy-mistral")
    merged = gitops_repo.pull_request("deploy-mistral", "Deploy mistral-7b")
    # and a change left open beside it
    gitops_repo.commit(config_map(kube.namespace, "unreviewed", mode="direct"), "unreviewed",
                       new_branch="not-merged")
    gitops_repo.pull_request("not-merged", "Not merged")

    merge_commit = gitops_repo.merge(merged)
    gitops_repo.wait_applied(merge_commit)

    applied = kube.get("inference.eh-ops.io/v1alpha1", "InferenceModel", "mistral-7b")
    assert applied is not None
    assert applied["spec"]["modelName"] == "mistral-7b"
    assert applied["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"] == gitops_repo.name
    # the revision applied is main after the merge: the open pull request's object is not in it
    assert config_map_data(kube, "unreviewed") is None
    assert config_map_data(kube, "settings") == {"mode": "git"}


def test_make_run_gitops_applies_the_demo_repository_to_the_demo_cluster(
        control_plane: ControlPlane | None, kube: KubeCluster, tmp_path: Path) -> None:
    """``make run GITOPS=1``'s start (devstack/gitops_demo.py) against this session's control plane:
    a file merged at the portal's layout for the cluster ``local`` is applied."""
    if control_plane is None:
        pytest.skip("the demo starts Flux against its own control plane's kubeconfig")
    said: list[str] = []
    demo = start_gitops_demo(control_plane, "local", kube.namespace, tmp_path, said.append,
                             flux_namespace=f"flux-{kube.namespace}")  # apart from the session's Flux
    assert demo is not None, said
    try:
        path = f"{demo.flux_path()}{kube.namespace}/configmap/hello.yaml"
        owner, name = demo.repository.split("/")
        demo.gitea.put_file(owner, name, path, yaml.safe_dump(config_map(kube.namespace, "hello", a="b")),
                                   "hello", new_branch="hello")
        merge_commit = demo.gitea.merge_pull_request(owner, name, demo.gitea.open_pull_request(owner, name, "hello",
                                                                                              "hello")["number"])
        demo.flux.wait_applied("local", merge_commit)
        assert config_map_data(kube, "hello") == {"a": "b"}
        assert demo.repository_url in "\n".join(demo.lines())
    finally:
        demo.flux.unwatch("local")
        demo.stop()
