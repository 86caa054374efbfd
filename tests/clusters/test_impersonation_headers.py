"""What an impersonating gateway puts on the wire: one Impersonate-User header and one
Impersonate-Group header per group (kube-apiserver reads repeated headers, not a list), on every
request; a gateway acting for nobody sends none. Checked against a real HTTP listener."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from clusters.kinds import all_models
from clusters.kube.client import ClusterGateway, NotFoundError
from clusters.models import Cluster


class Recorder(BaseHTTPRequestHandler):
    seen: list[list[tuple[str, str]]] = []

    def do_GET(self) -> None:
        Recorder.seen.append(list(self.headers.items()))
        body = json.dumps({"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 404}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Recorder.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def headers_sent(url: str, acting_for) -> list[tuple[str, str]]:
    cluster = Cluster(name="c", auth_method=Cluster.AuthMethod.TOKEN, server_url=url, allow_insecure_http=True)
    gateway = ClusterGateway(cluster, acting_for=acting_for)
    try:
        with pytest.raises(NotFoundError):  # the listener answers 404; only the request matters
            gateway.get(all_models()[0].kube, "ns", "name")
    finally:
        gateway.close()
    return Recorder.seen[-1]


def test_every_group_goes_in_a_header_of_its_own(listener):
    sent = headers_sent(listener, ("alice", ["portal:team:gpu", "portal:team:ml"]))
    assert ("Impersonate-User", "alice") in sent
    assert [value for name, value in sent if name == "Impersonate-Group"] == ["portal:team:gpu", "portal:team:ml"]


def test_a_gateway_acting_for_nobody_impersonates_nobody(listener):
    sent = headers_sent(listener, None)
    assert not [name for name, _ in sent if name.startswith("Impersonate")]
