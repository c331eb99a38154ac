"""A tiny OTLP/HTTP receiver (JSON encoding) that prints the spans it receives as an
indented tree per trace (SPEC OB-1, docs/tracing.md). Standard library only.

    python3 bench/otlp_printout.py PORT [SECONDS]

Listens on 127.0.0.1:PORT for `POST /v1/traces` (OTEL_EXPORTER_OTLP_PROTOCOL=http/json) and,
after SECONDS (default 30) or on Ctrl-C, prints every trace it received: one line per span,
indented under its parent, with the service, span name, trace id, span id and parent id.
Point a process at it with

    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:PORT OTEL_EXPORTER_OTLP_PROTOCOL=http/json
"""
import base64
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 4318
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
spans = []
lock = threading.Lock()


def hex_id(value):
    """OTLP/JSON writes ids as hex; accept base64 (the protobuf JSON mapping) too."""
    if not value:
        return ""
    if all(c in "0123456789abcdefABCDEF" for c in value):
        return value.lower()
    return base64.b64decode(value).hex()


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        export = json.loads(body)
        with lock:
            for resource in export.get("resourceSpans", []):
                service = next(
                    (a["value"].get("stringValue", "") for a in resource.get("resource", {}).get("attributes", [])
                     if a["key"] == "service.name"), "?")
                for scope in resource.get("scopeSpans", []):
                    for span in scope.get("spans", []):
                        spans.append({
                            "service": service,
                            "name": span.get("name", ""),
                            "trace": hex_id(span.get("traceId")),
                            "id": hex_id(span.get("spanId")),
                            "parent": hex_id(span.get("parentSpanId")),
                            "start": int(span.get("startTimeUnixNano", 0)),
                        })
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


def print_tree():
    with lock:
        by_trace = {}
        for span in spans:
            by_trace.setdefault(span["trace"], []).append(span)
    for trace, members in sorted(by_trace.items(), key=lambda kv: min(s["start"] for s in kv[1])):
        ids = {s["id"] for s in members}
        children = {}
        for span in members:
            children.setdefault(span["parent"] if span["parent"] in ids else None, []).append(span)
        print(f"trace {trace}")

        def walk(parent, depth):
            for span in sorted(children.get(parent, []), key=lambda s: s["start"]):
                above = span["parent"] or "-"
                print(f"{'  ' * depth}{span['service']:<14} {span['name']:<30} span {span['id']} parent {above}")
                walk(span["id"], depth + 1)

        walk(None, 1)


server = ThreadingHTTPServer(("127.0.0.1", PORT), Receiver)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(f"listening on 127.0.0.1:{PORT}", flush=True)
try:
    threading.Event().wait(SECONDS)
except KeyboardInterrupt:
    pass
server.shutdown()
print_tree()
