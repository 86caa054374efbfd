"""Load ``platform/samples/`` as the snapshot of a ``demo`` cluster, with statuses and node pools.

Idempotent: running it twice leaves the same rows (uids are derived from the object's identity).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import yaml
from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from clusters.models import Cluster
from clusters.sync.inbound import upsert_from_cluster
from clusters.validation.manifests import ManifestInvalid, resolve_kind, validate_manifest
from clusters.validation.quantities import quantity_to_int

DEMO_CLUSTER = "demo"


def _read_yaml(path: Path) -> Any:
    with path.open() as handle:
        return yaml.safe_load(handle)


class Command(BaseCommand):
    help = "Load the reference samples as the snapshot of a 'demo' cluster (statuses, node pools)."

    def handle(self, *args: Any, **options: Any) -> None:
        statuses = _read_yaml(Path(settings.DEMO_DIR) / "statuses.yaml") or {}
        with transaction.atomic():
            cluster, _ = Cluster.objects.update_or_create(
                name=DEMO_CLUSTER,
                defaults={
                    "auth_method": Cluster.AuthMethod.SNAPSHOT,
                    "description": "Snapshot of the reference samples; no API server behind it.",
                },
            )
            count = sum(
                self._load_sample(cluster, path, statuses) for path in sorted(Path(settings.SAMPLES_DIR).glob("*.yaml"))
            )
            pools = self._load_node_pools(cluster)
        self.stdout.write(self.style.SUCCESS(f"demo cluster: {count} objects, {pools} node pools"))
        if apps.is_installed("scheduler.rightsizing"):  # by name: clusters does not import scheduler
            call_command("load_demo_observations", cluster=DEMO_CLUSTER, stdout=self.stdout)

    def _load_sample(self, cluster: Cluster, path: Path, statuses: dict[str, Any]) -> int:
        document = _read_yaml(path)
        try:
            model = resolve_kind(document)
            manifest = validate_manifest(model, document)
        except ManifestInvalid as invalid:
            raise CommandError(f"{path.name}: {invalid}") from None
        metadata = manifest["metadata"]
        key = f"{model.kube.kind} {metadata['namespace']}/{metadata['name']}"
        metadata.update(
            uid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{cluster.name}/{key}")), resourceVersion="1", generation=1
        )
        status = statuses.get(key) or {}
        upsert_from_cluster(model, cluster, {**manifest, "status": {"observedGeneration": 1, **status}})
        return 1

    def _load_node_pools(self, cluster: Cluster) -> int:
        """Node pools belong to ``scheduler``; looked up by label so ``clusters`` does not import it."""
        node_pool = apps.get_model("scheduler", "NodePool")
        pools = _read_yaml(Path(settings.DEMO_DIR) / "nodepools.yaml") or []
        for pool in pools:
            node_pool.objects.update_or_create(
                cluster=cluster,
                name=pool["name"],
                defaults={
                    "source": "nodes",
                    "node_count": pool["nodeCount"],
                    "allocatable_bytes": quantity_to_int(pool["allocatableMemory"]),
                    "largest_node_bytes": quantity_to_int(pool["largestNodeMemory"]),
                    "gpu_count": pool["gpuCount"],
                    "gpu_memory_bytes": quantity_to_int(pool["gpuMemory"]) or 0,
                    "gpu_product": pool.get("gpuProduct", ""),
                    "accelerator": pool.get("accelerator", ""),
                },
            )
        return len(pools)
