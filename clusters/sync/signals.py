"""Signal receivers of the sync: a cluster that stops letting the portal manage a kind, or is
removed from the portal, hands its kinds back (``clusters.sync.handover``). Connected when
``ClustersConfig.ready()`` imports this module.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models.signals import pre_delete, pre_save
from django.dispatch import receiver

from clusters.kube.client import GatewayError
from clusters.models import Cluster
from clusters.sync.handover import release_finalizers
from clusters.sync.tasks import release_finalizers_task

logger = logging.getLogger(__name__)


@receiver(pre_save, sender=Cluster)
def _hand_back_unmanaged_kinds(sender: type[Cluster], instance: Cluster, **kwargs: Any) -> None:
    """On a switch from ``manage`` to ``mirror``, release the kinds' finalizers once the change is saved."""
    if instance.pk is None or instance.auth_method == Cluster.AuthMethod.SNAPSHOT:
        return
    before = Cluster.objects.filter(pk=instance.pk).values_list("managed_kinds", flat=True).first() or []
    dropped = [kind for kind in before if kind not in (instance.managed_kinds or [])]
    if dropped:
        transaction.on_commit(lambda: release_finalizers_task.delay(instance.pk, dropped))


@receiver(pre_delete, sender=Cluster)
def _hand_back_before_removal(sender: type[Cluster], instance: Cluster, **kwargs: Any) -> None:
    """Removing a cluster from the portal: release its finalizers first, while its credentials and
    rows still exist. Best effort: an unreachable cluster must not block its removal (logged)."""
    if not instance.managed_kinds or instance.auth_method == Cluster.AuthMethod.SNAPSHOT:
        return
    try:
        release_finalizers(instance, list(instance.managed_kinds))
    except GatewayError as error:
        logger.warning("cluster %s removed; its finalizers could not be released: %s", instance.name, error)
