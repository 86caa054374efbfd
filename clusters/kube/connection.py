""""Test connection" for a cluster: can the portal reach its API server with the stored
credentials, which Kubernetes is it, and which mirrored kinds can it list there.

Read-only and immediate (no task queue): staff press it right after entering credentials and want
the answer on the next page. Every request goes through :class:`clusters.kube.client.ClusterGateway`,
the same client, TLS settings and timeout the sync uses, so a pass here means the sync can connect.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import urllib3
from kubernetes import client
from kubernetes.config import ConfigException

from clusters.kinds import all_models
from clusters.kube.client import ClusterGateway, GatewayError, NotFoundError, translated
from clusters.models import Cluster


@dataclass
class ConnectionReport:
    cluster: str
    error: str = ""  # why the API server could not be used at all
    version: str = ""
    listed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # CRD not installed
    refused: list[str] = field(default_factory=list)  # "<kind>: <API server's message>"

    @property
    def ok(self) -> bool:
        return not self.error and not self.refused

    def summary(self) -> str:
        if self.error:
            return f"{self.cluster}: cannot connect: {self.error}"
        parts = [f"{self.cluster}: connected to Kubernetes {self.version}"]
        if self.listed:
            parts.append(f"lists {', '.join(self.listed)}")
        if self.missing:
            parts.append(f"not installed there: {', '.join(self.missing)}")
        if self.refused:
            parts.append(f"refused: {'; '.join(self.refused)}")
        return "; ".join(parts)


def _reason(error: urllib3.exceptions.HTTPError) -> str:
    """The innermost cause in words (``[Errno 111] Connection refused``, a certificate error),
    without urllib3's retry wrapping."""
    cause = getattr(error, "reason", None) or error
    text = str(cause)
    return text.split(": ", 1)[1] if isinstance(cause, urllib3.exceptions.NewConnectionError) and ": " in text else text


def check_connection(cluster: Cluster) -> ConnectionReport:
    report = ConnectionReport(cluster.name)
    if cluster.auth_method == Cluster.AuthMethod.SNAPSHOT:
        report.error = "it is a snapshot (demo data, no API server to connect to)"
        return report
    try:
        gateway = ClusterGateway(cluster)
    except (ConfigException, OSError, ValueError) as error:
        report.error = f"the client could not be configured: {error}"
        return report
    try:
        try:
            info = client.VersionApi(gateway.api_client).get_code(_request_timeout=gateway.timeout)
        except urllib3.exceptions.HTTPError as error:
            report.error = f"connection failed: {_reason(error)}"
            return report
        except client.ApiException as error:
            with translated():
                raise error from None
        report.version = info.git_version
        namespace = (cluster.namespaces or [None])[0]
        for model in all_models():
            kind = model.kube.kind
            try:
                gateway.list_page(model.kube, namespace, 1, None)
                report.listed.append(kind)
            except NotFoundError:
                report.missing.append(kind)
            except GatewayError as error:
                if error.status == 0:
                    raise
                report.refused.append(f"{kind}: {error}")
    except GatewayError as error:
        report.error = str(error)
    finally:
        gateway.close()
    return report
