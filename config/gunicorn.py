"""The web process's server configuration (``gunicorn -c python:config.gunicorn``), shared by the
image, the kustomize base and the Helm chart, and started as is by the HTTP benchmarks
(bench/http_server.py) and tests/deploy/test_slow_clients.py.

gunicorn's own ASGI worker (asyncio) on ``config.asgi``: a connection costs a coroutine until its
request is complete, so clients that send their headers slowly ("slowloris") hold no worker. The
sync worker gives each connection a whole process and the threaded worker a thread until the
request is read, with no deadline for the headers: 12 slow-header connections stopped /healthz
answering under 3 sync workers, and 40 under 3 threaded workers of 8 or 16 threads, while 3 ASGI
workers answered every probe. The price is throughput: Django hops threads for each sync
middleware and view under ASGI, and one worker serves one view at a time, so on 2 cores with 16
clients the threaded worker served about twice the requests per second (docs/serving.md).
"""

import os

wsgi_app = "config.asgi:application"
worker_class = "asgi"
# 2 cores per pod (the chart's default limit) + 1, so one worker waiting on the database leaves both busy
workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
bind = ["0.0.0.0:8000"]
keepalive = 5  # seconds an idle keep-alive connection is held (behind a load balancer's 60 s idle: below it)
timeout = 60  # a worker silent this long is restarted
graceful_timeout = 30
accesslog = "-"
