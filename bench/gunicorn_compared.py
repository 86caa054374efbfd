"""gunicorn's settings for the server models the deploy's (config/web_server.py) is compared with
(bench/http_server.py ALTERNATIVES): the former deploy's, less the worker class and application,
which each alternative names."""

import os

workers = int(os.environ.get("WEB_CONCURRENCY", "3"))  # as config/web_server.WORKERS
keepalive = 5
timeout = 60
graceful_timeout = 30
