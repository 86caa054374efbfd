"""The web process's server: ``python -m config.web_server [--bind HOST:PORT]``, shared by the image,
the kustomize base and the Helm chart, and started as is by the HTTP benchmarks
(bench/http_server.py) and tests/deploy/test_slow_clients.py.

granian (a Rust HTTP server) runs the WSGI application (``config.wsgi``) on a pool of threads per
worker. The HTTP/1 connection, its headers and its body are read in Rust, asynchronously: a
Python thread is taken only once a request is complete, so clients that send their headers slowly
("slowloris") hold no thread, and a header read is cut off after ``HEADER_READ_TIMEOUT_MS``.
gunicorn's sync and threaded workers hold a process or a thread per connection until its headers
are in (12 slow connections stopped /healthz under 3 sync workers, 40 under 3 x 8 threads);
gunicorn's ASGI worker resists them but runs one Django view at a time per worker, hopping threads
for each sync middleware. On 2 cores with 16 clients granian served 1.2-2x the requests per
second of either (docs/serving.md gives the runs).
"""

from __future__ import annotations

import argparse
import os

from granian import Granian
from granian.constants import HTTPModes, Interfaces
from granian.http import HTTP1Settings

APPLICATION = "config.wsgi:application"
# 2 cores per pod (the chart's default limit) + 1, so one worker's threads waiting on the database leave both busy
WORKERS = int(os.environ.get("WEB_CONCURRENCY", "3"))
# threads per worker running views: while one waits on PostgreSQL another renders
THREADS = int(os.environ.get("WEB_THREADS", "8"))
HEADER_READ_TIMEOUT_MS = 10_000  # a client that has not sent its whole header by then is dropped
WORKER_KILL_TIMEOUT_S = 30  # on shutdown, in-flight requests get this long (gunicorn's graceful_timeout)


def server(bind: str) -> Granian:
    """The configured server listening on ``bind`` (``host:port``)."""
    host, _, port = bind.rpartition(":")
    return Granian(
        APPLICATION,
        address=host or "0.0.0.0",
        port=int(port),
        interface=Interfaces.WSGI,
        http=HTTPModes.http1,  # behind a load balancer or ingress that speaks HTTP/1.1 to pods
        workers=WORKERS,
        blocking_threads=THREADS,
        http1_settings=HTTP1Settings(header_read_timeout=HEADER_READ_TIMEOUT_MS, keep_alive=True),
        websockets=False,
        log_access=True,
        respawn_failed_workers=True,
        workers_kill_timeout=WORKER_KILL_TIMEOUT_S,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bind", default="0.0.0.0:8000", help="host:port to listen on (default 0.0.0.0:8000)")
    server(parser.parse_args(argv).bind).serve()


if __name__ == "__main__":
    main()
