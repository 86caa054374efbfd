"""gunicorn's settings for the portal's web workers (``gunicorn -c python:config.gunicorn``).

config/web_server.py runs them with the sync worker class behind nginx, on a listening socket it
opens and hands over (``--bind fd://N``); bench/http_server.py's ALTERNATIVES run them bare with
other worker classes to compare server models.
"""

import os

# 2 cores per pod (the chart's default limit) + 1: a worker waiting on PostgreSQL leaves both cores busy. More only
# contend: 16 clients, 100,000 rows, catalog sorted p99 275 ms with 3 workers, 251-319 with 4, 276-388 with 5
workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
worker_class = "sync"
keepalive = 5  # for the worker classes that keep connections (the sync worker closes each one)
timeout = 60  # a worker silent this long is killed and replaced (a request stuck in a view)
graceful_timeout = 30  # on SIGTERM, in-flight requests get this long
accesslog = None  # nginx logs each request, with the client's address
control_socket_disable = True  # gunicorn's runtime control socket: unused, and the image's root is read-only
# Django and the portal's modules are imported once, before the workers are forked: they start in
# a fraction of the time (5 workers importing them at once took 15 s on 2 busy cores) and share
# those pages. Nothing opens a connection at import (Django connects on a request's first query).
preload_app = True
