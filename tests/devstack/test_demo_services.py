"""Every namespace the live demo's teams may deploy to has KubeAI's ``kubeai`` Service, so a KubeAI
Model the guided deploy creates there answers (issue 43: one outside ``default`` answered 502)."""

from __future__ import annotations

from django.utils import timezone

from devstack.live_demo import KUBEAI_PORT, KUBEAI_SERVICE, SSO_TEAMS, demo_manifests, serving_services


def test_every_granted_namespace_has_the_kubeai_service() -> None:
    manifests = demo_manifests("http://127.0.0.1:9", timezone.now())
    services = serving_services(manifests)
    granted = {namespace for _, namespace in SSO_TEAMS.values()}
    assert granted == {"default", "kserve-controller-system"}  # the demo's grants, as the issue names them
    for namespace in granted | {m["metadata"]["namespace"] for m, _ in manifests}:
        assert services.get((namespace, KUBEAI_SERVICE)) == KUBEAI_PORT, namespace
