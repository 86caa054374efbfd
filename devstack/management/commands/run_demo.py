"""``manage.py run_demo`` (what ``make run`` runs): the live demo where Go can build the control
plane, else the embedded one (snapshot data, nothing moves), saying in one line how to get the live one."""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from devstack.control_plane import ControlPlaneUnavailable, build_binaries
from devstack.live_demo import Endpoints, LiveDemo

NO_GO = (
    "Embedded demo (snapshot data, nothing moves): install Go (https://go.dev/doc/install) and run "
    "`make run` again for the live one, on a local Kubernetes control plane."
)


class Command(BaseCommand):
    help = "Serve the portal with demo data: live on a local control plane when Go is installed, else embedded."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--gateway-port", type=int, default=settings.GATEWAY_PORT)
        parser.add_argument("--embedded", action="store_true", help="The embedded demo even where Go is installed.")
        parser.add_argument("--gitops", action="store_true",
                            help="Also a local Gitea and Flux applying its repository to the cluster (docs/demo.md).")

    def handle(self, *args: Any, host: str, port: int, gateway_port: int, embedded: bool, gitops: bool,
               **options: Any) -> None:
        binaries = None
        if not embedded:  # the build says what it does: nothing when cached, its steps and progress when not
            try:
                binaries = build_binaries(say=self._say)
            except ControlPlaneUnavailable:
                embedded = True
            except RuntimeError as error:  # a failed build: its output, not a traceback
                raise CommandError(str(error)) from None
        if embedded:
            self.stdout.write(NO_GO)
            call_command("load_demo", stdout=self.stdout)
            call_command("ensure_demo_admin", stdout=self.stdout)
            call_command("runserver", f"{host}:{port}", use_reloader=False)
            return
        raise SystemExit(LiveDemo(Endpoints(host, port, gateway_port), binaries, self.stdout, gitops=gitops).run())

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()
