"""A sink for OTLP/HTTP export that reads each batch and discards it: the collector of the
tracing-on benchmark (docs/benchmarks.md), fast enough not to hold the exporter back.

    python3 bench/otlp_sink.py PORT

Prints how many batches and bytes it took when stopped (SIGTERM).
"""
import sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
count = [0, 0]
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        n = int(self.headers.get("content-length", 0)); self.rfile.read(n)
        count[0] += 1; count[1] += n
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
t = threading.Thread(target=s.serve_forever, daemon=True); t.start()
import time, signal
signal.signal(signal.SIGTERM, lambda *a: (print(f"requests {count[0]} bytes {count[1]}", flush=True), sys.exit(0)))
while True: time.sleep(1)
