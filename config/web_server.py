"""The web process's server: ``python -m config.web_server [--bind HOST:PORT]``, shared by the image,
the kustomize base and the Helm chart, and started as is by the HTTP benchmarks
(bench/http_server.py) and tests/deploy/.

nginx listens on the bind address, in front of gunicorn's sync workers (config/gunicorn.py) on a
loopback socket this process opens and hands to gunicorn. Why the pair (docs/serving.md gives the
runs):

- **Requests queue once, in order.** A sync worker takes a connection from the shared socket only
  when it is idle, so every worker is busy while any request waits, and none waits behind a
  worker's backlog. Servers that hold keep-alive connections per worker (granian, gunicorn's
  threaded and ASGI workers) keep a connection with the worker that took it: 16 clients on 3
  workers were split 2/6/8, and the clients of the fullest worker waited 3 times as long as those
  of the emptiest (a p99 twice the median).
- **Slow clients hold no worker.** nginx reads a request's header (10 s deadline) and its whole
  body, and takes the whole answer, in one event loop; a worker sees a complete request and is
  free once its answer is written to nginx. Sync workers on their own were stopped by 12
  slow-header connections.
- gunicorn's master replaces a worker that is silent for its ``timeout`` (a request stuck in a view).
- **Probes never queue behind pages.** nginx answers ``/healthz`` itself, and sends ``/readyz`` to a
  second gunicorn with one worker on its own socket, which no page reaches. Through the pages'
  workers, 16 busy clients held the liveness probe 2.8-4.7 s, close to the kubelet's 5 s timeout.

The three live and die together: any one ending ends the others, and this process exits non-zero, so
the container restarts. SIGTERM or SIGINT stops both gracefully (nginx finishes the requests it
holds, gunicorn's workers theirs within ``graceful_timeout``). Both children end with this process
even when it is killed outright (common.child_processes).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clusters.validation.limits import MAX_REQUEST_BODY_BYTES
from common.child_processes import die_with_parent
from config.gunicorn import graceful_timeout, timeout

APPLICATION = "config.wsgi:application"
NGINX_CONFIG = Path(__file__).with_name("nginx.conf.in")
BACKLOG = 2048  # requests queued for a free worker, beyond which connects wait in nginx
# /readyz only, a probe every few seconds per kubelet: one worker. Its master and worker cost a pod about
# 140 MiB PSS and one database connection (docs/deploy.md "Probes"); they share the preloaded pages
PROBE_WORKERS = 1
WORKER_KILL_TIMEOUT_S = graceful_timeout  # what a request in flight gets on shutdown
STOP_SECONDS = graceful_timeout + 5  # then whatever is left is killed
STOPPING = (signal.SIGINT, signal.SIGTERM)
WATCHED = {*STOPPING, signal.SIGCHLD}

logger = logging.getLogger("config.web_server")


def nginx_binary() -> str:
    """nginx's path; a clear error where it is not installed (the image installs Debian's nginx-light)."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise SystemExit("config.web_server: nginx is not installed (Debian: apt-get install nginx-light)")
    return found


def upstream_socket() -> socket.socket:
    """A listening loopback socket on a free port, for gunicorn's workers to accept from."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(BACKLOG)
    listener.set_inheritable(True)
    return listener


def nginx_config(listen: str, upstream: str, probes: str, folder: Path, access_log: str) -> str:
    """config/nginx.conf.in with its fields filled: ``upstream`` the pages' gunicorn, ``probes`` the
    readiness probe's."""
    fields = {
        "LISTEN": listen,
        "UPSTREAM": upstream,
        "PROBES_UPSTREAM": probes,
        "TEMP": str(folder),
        "ACCESS_LOG": access_log,
        "MAX_BODY_BYTES": str(MAX_REQUEST_BODY_BYTES),
        "MAX_BODY_SAID": f"{MAX_REQUEST_BODY_BYTES / 2**20:g} MiB",
        "READ_TIMEOUT_S": str(timeout + 30),
    }
    text = NGINX_CONFIG.read_text()
    for name, value in fields.items():
        text = text.replace(f"@{name}@", value)
    return text


class WebServer:
    """nginx and gunicorn, started, watched and stopped together."""

    def __init__(self, bind: str) -> None:
        host, _, port = bind.rpartition(":")
        self.listen = f"{host or '0.0.0.0'}:{port}"
        self.children: dict[str, subprocess.Popen] = {}
        self.mask: set[signal.Signals] = set()

    def _spawn(self, name: str, args: list[str], **options) -> None:
        def in_child() -> None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
            die_with_parent()

        self.children[name] = subprocess.Popen(args, preexec_fn=in_child, **options)

    def _gunicorn(self, name: str, listener: socket.socket, options: list[str]) -> str:
        """Start a gunicorn on ``listener`` (handed over by file descriptor); its upstream address."""
        self._spawn(
            name,
            [sys.executable, "-m", "gunicorn", "-c", "python:config.gunicorn", *options,
             "--bind", f"fd://{listener.fileno()}", APPLICATION],
            pass_fds=(listener.fileno(),),
            env={**os.environ, "WEB_LOCAL_PROXY": "true"},  # the client's address: accounts/client_address.py
        )  # fmt: skip
        return f"127.0.0.1:{listener.getsockname()[1]}"

    def run(self) -> int:
        """Serve until SIGINT or SIGTERM (then 0) or until a child ends (then 1)."""
        folder = Path(tempfile.mkdtemp(prefix="web-server-"))
        folder.chmod(0o755)  # nginx's workers, when its master runs as root, run as nobody and write here
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
        listeners = {"gunicorn": upstream_socket(), "probes": upstream_socket()}
        try:
            upstream = self._gunicorn("gunicorn", listeners["gunicorn"], [])
            probes = self._gunicorn("probes", listeners["probes"], ["--workers", str(PROBE_WORKERS)])
            config = folder / "nginx.conf"
            config.write_text(nginx_config(self.listen, upstream, probes, folder, "/dev/stdout portal"))
            # connections nginx makes before gunicorn's workers are up wait in the sockets' backlogs
            self._spawn("nginx", [nginx_binary(), "-p", str(folder), "-c", str(config), "-e", "stderr",
                                  "-g", "daemon off;"])  # fmt: skip
            for listener in listeners.values():
                listener.close()
            received = self._watch()
            return self._stop(received)
        finally:
            for process in self.children.values():  # left only when this process itself failed
                if process.poll() is None:
                    process.kill()
                    process.wait()
            signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
            shutil.rmtree(folder, ignore_errors=True)

    def _ended(self) -> list[str]:
        return [name for name, process in self.children.items() if process.poll() is not None]

    def _watch(self) -> signal.Signals | None:
        """Wait for a stop signal (returned) or a child's end (None)."""
        while True:
            info = signal.sigwaitinfo(WATCHED)
            if info.si_signo in STOPPING:
                return signal.Signals(info.si_signo)
            for name in self._ended():
                logger.error("%s exited with %s: stopping the web server", name, self.children[name].returncode)
                return None

    def _stop(self, received: signal.Signals | None) -> int:
        """Stop both gracefully (nginx: SIGQUIT; gunicorn: SIGTERM), killing what is left after
        ``STOP_SECONDS``; 0 when a signal asked for it, 1 when a child had ended on its own."""
        for name, process in self.children.items():
            if process.poll() is None:
                process.send_signal(signal.SIGQUIT if name == "nginx" else signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        while len(self._ended()) < len(self.children) and time.monotonic() < deadline:
            signal.sigtimedwait(WATCHED, max(0.0, deadline - time.monotonic()))
        for name, process in self.children.items():
            if process.poll() is None:
                logger.warning("%s did not stop within %d s: killed", name, STOP_SECONDS)
                process.kill()
                process.wait()
        return 0 if received is not None else 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bind", default="0.0.0.0:8000", help="host:port to listen on (default 0.0.0.0:8000)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    sys.exit(WebServer(parser.parse_args(argv).bind).run())


if __name__ == "__main__":
    main()
