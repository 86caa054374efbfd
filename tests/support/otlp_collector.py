"""An OpenTelemetry collector stand-in for the tests: an OTLP/HTTP receiver on loopback that
decodes what a real exporter posts to ``/v1/traces`` (protobuf ``ExportTraceServiceRequest``, the
messages of ``opentelemetry-proto``) and keeps every span, with its service's name.

Point a process at it with ``OTEL_EXPORTER_OTLP_ENDPOINT=collector.url``.
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    kind: str  # SPAN_KIND_SERVER, SPAN_KIND_CLIENT...
    trace_id: str  # hex, as in traceparent
    span_id: str
    parent_span_id: str  # "" for a root span
    attributes: dict[str, object]


def _value(any_value) -> object:
    return getattr(any_value, any_value.WhichOneof("value")) if any_value.WhichOneof("value") else None


class OtlpCollector:
    """``start()`` serves on a free loopback port; ``spans`` is every span received so far."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                collector.receive(ExportTraceServiceRequest.FromString(body))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *_: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def receive(self, request: ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            attributes = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                received = [
                    ReceivedSpan(
                        service=str(attributes.get("service.name", "")),
                        name=span.name,
                        kind=Span.SpanKind.Name(span.kind),
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        attributes={a.key: _value(a.value) for a in span.attributes},
                    )
                    for span in scope_spans.spans
                ]
                with self.lock:
                    self.spans += received

    def received(self) -> list[ReceivedSpan]:
        with self.lock:
            return list(self.spans)

    def start(self) -> OtlpCollector:
        threading.Thread(target=self.server.serve_forever, name="otlp-collector", daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
