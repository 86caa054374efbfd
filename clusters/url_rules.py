"""What an endpoint URL the portal sends credentials to may contain, and how URLs are shown.

Credentials have their own write-only, encrypted fields (``bearer_token``,
``prometheus_auth_header``). A URL is shown in the admin, the API, error texts and logs, so it
must carry none: user-info (``https://user:pass@host``) and query strings (``?token=...``) are
refused when a URL is stored, and :func:`redact_url` / :func:`redact_urls_in` blank them wherever
a URL from elsewhere (an exception, an older row) is shown or logged.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.core.exceptions import ValidationError

REDACTED = "REDACTED"
# A URL inside free text: scheme://, then anything up to whitespace or a quote/bracket closing it.
_URL_IN_TEXT = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>()\[\]{}]+")


def validate_http_url(value: str) -> None:
    """http(s) URL with a host and nothing secret in it.

    Unlike Django's URLValidator, single-label hosts (``https://k8s:6443``, ``http://prometheus:9090``)
    are fine, as they are normal inside clusters and compose networks. Whether plain ``http://`` is
    acceptable depends on the cluster (``Cluster.insecure_url_errors``), not on the URL alone.
    """
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(f"{redact_url(value)!r} is not an http(s) URL with a host, e.g. https://10.0.0.1:6443")
    if parts.username is not None or parts.password is not None:
        raise ValidationError(
            f"{redact_url(value)!r} must not carry user-info (user:password@): URLs are shown in pages and "
            "logs; put credentials in the write-only bearer_token or prometheus_auth_header"
        )
    if parts.query or parts.fragment:
        raise ValidationError(
            f"{redact_url(value)!r} must be a base URL without ?query or #fragment (they may carry tokens)"
        )
    try:
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        raise ValidationError(f"{redact_url(value)!r} has an invalid port") from None


def redact_url(url: str) -> str:
    """``url`` with its user-info and every query value replaced by ``REDACTED``; other text as is."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. a malformed IPv6 host: nothing can be kept safely
        return url if "@" not in url and "?" not in url else REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query = parts.query
    if query:
        query = urlencode([(key, REDACTED) for key, _ in parse_qsl(query, keep_blank_values=True)], safe=REDACTED)
        query = query or REDACTED
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_urls_in(text: str) -> str:
    """Every URL inside free text (an error message, a log line) passed through :func:`redact_url`."""
    return _URL_IN_TEXT.sub(lambda match: redact_url(match.group(0)), text)
