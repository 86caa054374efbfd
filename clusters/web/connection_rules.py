"""Who may point a cluster somewhere else, and where: one rule for the admin, its form and the API.

A cluster's connection settings decide where the portal sends the cluster's credential and whom
it believes to be the API server. Changing them (the server, the CA, skipping TLS verification,
the kubeconfig file or context, the auth method, impersonation) is refused unless the person is staff with the
``clusters.change_cluster`` permission *and* gives the stored bearer token again (showing they
hold it already, so the change cannot hand it to a listener of theirs). A kubeconfig file must
lie in ``CLUSTER_KUBECONFIG_DIR`` (a directory staff configure; empty: no kubeconfig file may be
named), and a CA must be PEM certificates.
"""

from __future__ import annotations

import os
from typing import Any

from cryptography import x509
from django.conf import settings

from clusters.models import Cluster

CONNECTION_FIELDS = (
    "auth_method",
    "server_url",
    "ca_cert",
    "insecure_skip_tls_verify",
    "kubeconfig_path",
    "kubeconfig_context",
    "impersonate_users",  # off, people's writes are no longer checked by the cluster's RBAC
)


def kubeconfig_path_error(path: str) -> str | None:
    """Why ``path`` may not be read as a kubeconfig (None: it may)."""
    directory = settings.CLUSTER_KUBECONFIG_DIR
    if not directory:
        return "no kubeconfig file may be named: staff set CLUSTER_KUBECONFIG_DIR to the directory that holds them"
    root = os.path.realpath(directory)
    real = os.path.realpath(os.path.join(root, path))
    if os.path.commonpath([root, real]) != root:
        return f"{path!r} is outside {directory} (CLUSTER_KUBECONFIG_DIR), the only place kubeconfig files are read"
    if not os.path.isfile(real):
        return f"{path!r} is not a file in {directory} (CLUSTER_KUBECONFIG_DIR)"
    return None


def ca_cert_error(pem: str) -> str | None:
    """Why ``pem`` is not a CA bundle (None: it is one or more PEM certificates)."""
    try:
        x509.load_pem_x509_certificates(pem.encode())
    except ValueError as error:
        return f"must be PEM-encoded certificates (-----BEGIN CERTIFICATE-----): {error}"
    return None


def _changed(stored: Cluster | None, candidate: Cluster) -> list[str]:
    """The connection settings the candidate changes; for a new cluster, the risky ones it sets."""
    if stored is None:
        return [
            field for field in ("insecure_skip_tls_verify", "kubeconfig_path", "ca_cert") if getattr(candidate, field)
        ]
    return [field for field in CONNECTION_FIELDS if getattr(candidate, field) != getattr(stored, field)]


def connection_change_errors(
    user: Any, stored: Cluster | None, candidate: Cluster, supplied: set[str]
) -> dict[str, str]:
    """Field -> message for each rule the change breaks (empty: allowed).

    ``stored`` is the row as saved (None when creating), ``candidate`` the values after the change
    and ``supplied`` the credential fields given in this request.
    """
    errors: dict[str, str] = {}
    changed = _changed(stored, candidate)
    if candidate.kubeconfig_path and "kubeconfig_path" in changed:
        problem = kubeconfig_path_error(candidate.kubeconfig_path)
        if problem:
            errors["kubeconfig_path"] = problem
    if candidate.ca_cert and "ca_cert" in changed:
        problem = ca_cert_error(candidate.ca_cert)
        if problem:
            errors["ca_cert"] = problem
    if changed and not (user is not None and user.is_staff and user.has_perm("clusters.change_cluster")):
        for field in changed:
            errors.setdefault(
                field, "only staff with the clusters.change_cluster permission may change a cluster's connection"
            )
    if stored is not None and changed and stored.bearer_token and "bearer_token" not in supplied:
        errors["bearer_token"] = (
            f"must be given again to change {', '.join(changed)} (the stored token is never sent elsewhere "
            "on someone else's word)"
        )
    return errors
