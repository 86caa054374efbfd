"""A logging filter that blanks credentials in URLs before any handler writes a record.

Errors from HTTP libraries quote the URL they failed on; a Prometheus or API server URL carrying
``user:password@`` or ``?token=`` reached the server log that way. Installed on the handlers in
``LOGGING`` (a handler filter also sees records propagated from every logger), and Celery workers
keep those handlers (``CELERY_WORKER_HIJACK_ROOT_LOGGER = False``).
"""

from __future__ import annotations

import logging

from clusters.url_rules import redact_urls_in


class RedactUrlsFilter(logging.Filter):
    """Rewrites the record's message and traceback text with :func:`clusters.url_rules.redact_urls_in`."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_urls_in(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_urls_in(record.exc_text)
        return True
