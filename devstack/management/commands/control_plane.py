"""``manage.py control_plane``: the tests' real control plane, on its own, until Ctrl-C."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from devstack.control_plane import ControlPlaneUnavailable, apply_crds_to, running_control_plane


class Command(BaseCommand):
    help = (
        "Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (simulated GPU nodes) "
        "on loopback with the portal's CRDs, print the admin kubeconfig, and stop everything on Ctrl-C."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        try:
            with running_control_plane(prepare=apply_crds_to) as plane:
                self.stdout.write(
                    f"kube-apiserver {plane.url} (started in {plane.started_in_s:.1f} s)\n"
                    f"export KUBECONFIG={plane.kubeconfig}\nCtrl-C stops it and removes its data."
                )
                self.stdout.flush()
                while not stop.wait(1):
                    plane.check_alive()
        except ControlPlaneUnavailable as error:
            raise CommandError(str(error)) from None
