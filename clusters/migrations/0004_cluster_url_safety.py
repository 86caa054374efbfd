"""allow_insecure_http, and stored URLs brought under the new rules without losing a working setup.

User-info in a Prometheus URL becomes the equivalent Basic ``prometheus_auth_header`` (when none is
set); user-info, query and fragment are dropped from every stored URL (the Kubernetes client never
used user-info). Clusters that already send credentials over plain http keep working with
``allow_insecure_http`` set, visible in the admin. Stored error texts lose credentials quoted in URLs.
"""

import base64
from urllib.parse import unquote, urlsplit, urlunsplit

from django.db import migrations, models

from clusters.url_rules import redact_urls_in


def _split_credentials(url):
    """(url without user-info, query and fragment; "user:password" or None)."""
    parts = urlsplit(url)
    userinfo = None
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, netloc = netloc.rpartition("@")
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")), userinfo


def bring_urls_under_rules(apps, schema_editor):
    Cluster = apps.get_model("clusters", "Cluster")
    Refresh = apps.get_model("rightsizing", "Refresh")
    for cluster in Cluster.objects.all():
        cluster.server_url, _ = _split_credentials(cluster.server_url)
        cluster.prometheus_url, userinfo = _split_credentials(cluster.prometheus_url)
        if userinfo and not cluster.prometheus_auth_header:
            user, _, password = userinfo.partition(":")
            basic = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
            cluster.prometheus_auth_header = f"Basic {basic}"
        plain_http = urlsplit(cluster.server_url).scheme == "http" or (
            cluster.prometheus_auth_header and urlsplit(cluster.prometheus_url).scheme == "http"
        )
        cluster.allow_insecure_http = bool(plain_http)
        cluster.last_error = redact_urls_in(cluster.last_error)
        cluster.save()
    for refresh in Refresh.objects.exclude(error=""):
        scrubbed = redact_urls_in(refresh.error)
        if scrubbed != refresh.error:
            refresh.error = scrubbed
            refresh.save(update_fields=["error"])


class Migration(migrations.Migration):

    dependencies = [
        ('clusters', '0003_cluster_managed_kinds'),
        ('rightsizing', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='cluster',
            name='allow_insecure_http',
            field=models.BooleanField(default=False, help_text='Staff only: let the API server URL (and a Prometheus URL with an auth header) be plain http://, sending credentials unencrypted. Off: https:// is required.'),
        ),
        migrations.RunPython(bring_urls_under_rules, migrations.RunPython.noop),
    ]
