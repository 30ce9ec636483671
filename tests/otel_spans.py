"""Where the tracing tests read spans from, in one shape whatever the transport:

- `Recorder`: the SDK's InMemorySpanExporter behind a TracerProvider that judge_mcp/telemetry/otel.py is made to use
  (the in-memory transport, in this process);
- `Collector`: an OTLP/HTTP trace receiver on 127.0.0.1 (`POST /v1/traces`, protobuf), which a `judge-mcp serve`
  subprocess exports to when OTEL_EXPORTER_OTLP_ENDPOINT names it (stdio and HTTP transports): the README's recipe.

Each gives `spans()`: dicts with name, kind (INTERNAL / SERVER / CLIENT), attributes, events [(name, attributes)],
span_id, parent_id, status (UNSET / OK / ERROR); and `raw()`: everything exported, as text, to search for what must
not be there.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

KINDS = {1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}


class Recorder:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def spans(self) -> list[dict[str, Any]]:
        return [
            {
                "name": s.name, "kind": s.kind.name, "attributes": dict(s.attributes or {}),
                "events": [(e.name, dict(e.attributes or {})) for e in s.events],
                "span_id": s.context.span_id, "parent_id": s.parent.span_id if s.parent else None, "status": s.status.status_code.name,
                "resource": dict(s.resource.attributes),
            }
            for s in self.exporter.get_finished_spans()
        ]

    def raw(self) -> str:
        return "\n".join(s.to_json() for s in self.exporter.get_finished_spans())


def _value(any_value: Any) -> Any:
    which = any_value.WhichOneof("value")
    if which == "array_value":
        return tuple(_value(v) for v in any_value.array_value.values)
    return getattr(any_value, which) if which else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


class Collector:
    """An OTLP/HTTP receiver for traces: keeps every request's body and decodes its spans."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                ok = self.path == "/v1/traces"
                if ok:
                    collector.bodies.append(body)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if ok else 404)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[dict[str, Any]]:
        out = []
        for body in self.bodies:
            request = ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope in resource_spans.scope_spans:
                    for s in scope.spans:
                        out.append({
                            "name": s.name, "kind": KINDS.get(s.kind, str(s.kind)), "attributes": _attributes(s.attributes),
                            "events": [(e.name, _attributes(e.attributes)) for e in s.events],
                            "span_id": int.from_bytes(s.span_id, "big"),
                            "parent_id": int.from_bytes(s.parent_span_id, "big") if s.parent_span_id else None,
                            "status": STATUS.get(s.status.code, str(s.status.code)), "resource": resource,
                        })
        return out

    def raw(self) -> str:
        return "\n".join(body.decode("utf-8", "replace") for body in self.bodies)
