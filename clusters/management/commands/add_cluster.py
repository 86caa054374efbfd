"""Register a cluster from the command line (the admin and ``POST /api/clusters/`` do the same)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from clusters.models import Cluster


class Command(BaseCommand):
    help = (
        "Register or update a cluster: add_cluster NAME (--kubeconfig PATH [--context CTX] | --server URL "
        "[--token TOKEN] [--ca-file FILE | --insecure-skip-tls-verify] | --in-cluster) [--namespace NS ...]"
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("name")
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--kubeconfig", help="Path to a kubeconfig file.")
        source.add_argument("--server", help="API server URL, e.g. https://10.0.0.1:6443.")
        source.add_argument("--in-cluster", action="store_true", help="Use the pod's service account.")
        parser.add_argument("--context", default="", help="Context in the kubeconfig (default: its current one).")
        parser.add_argument("--token", default="", help="Bearer token (never printed).")
        tls = parser.add_mutually_exclusive_group()
        tls.add_argument("--ca-file", help="PEM file with the API server's CA.")
        tls.add_argument("--insecure-skip-tls-verify", action="store_true")
        parser.add_argument(
            "--namespace",
            action="append",
            default=[],
            dest="namespaces",
            help="Namespace to sync (repeatable); all namespaces when omitted.",
        )
        parser.add_argument("--prometheus", default="", help="Prometheus base URL for right-sizing metrics.")
        parser.add_argument(
            "--allow-insecure-http",
            action="store_true",
            help="Allow plain http:// URLs although credentials are sent to them (default: https:// required).",
        )
        parser.add_argument("--timeout", type=int, default=10, help="Seconds for each API call (default 10).")
        parser.add_argument(
            "--manage",
            default="",
            metavar="KIND[,KIND]",
            help="Kinds the portal acts as the controller for, e.g. InferenceModel,InferenceRun "
            "(default: mirror only; another controller acts).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["kubeconfig"]:
            method = Cluster.AuthMethod.KUBECONFIG
        elif options["in_cluster"]:
            method = Cluster.AuthMethod.IN_CLUSTER
        else:
            method = Cluster.AuthMethod.TOKEN
        ca_cert = ""
        if options["ca_file"]:
            try:
                ca_cert = Path(options["ca_file"]).read_text()
            except OSError as error:
                raise CommandError(f"--ca-file {options['ca_file']}: {error.strerror}") from None
        cluster = Cluster.objects.filter(name=options["name"]).first() or Cluster(name=options["name"])
        cluster.auth_method = method
        cluster.kubeconfig_path = options["kubeconfig"] or ""
        cluster.kubeconfig_context = options["context"]
        cluster.server_url = options["server"] or ""
        cluster.bearer_token = options["token"] or cluster.bearer_token
        cluster.ca_cert = ca_cert
        cluster.insecure_skip_tls_verify = options["insecure_skip_tls_verify"]
        cluster.allow_insecure_http = options["allow_insecure_http"]
        cluster.namespaces = options["namespaces"]
        cluster.prometheus_url = options["prometheus"]
        cluster.request_timeout_seconds = options["timeout"]
        cluster.managed_kinds = [kind.strip() for kind in options["manage"].split(",") if kind.strip()]
        try:
            cluster.full_clean()
        except ValidationError as error:
            raise CommandError(
                "; ".join(f"{field}: {' '.join(messages)}" for field, messages in error.message_dict.items())
            ) from None
        created = cluster.pk is None
        cluster.save()
        scope = ", ".join(cluster.namespaces) or "all namespaces"
        if cluster.managed_kinds:
            scope += f"; manages {', '.join(cluster.managed_kinds)}"
        self.stdout.write(
            self.style.SUCCESS(
                f"{'registered' if created else 'updated'} cluster {cluster.name} "
                f"({cluster.get_auth_method_display()}, {scope})"
            )
        )
