#!/usr/bin/env python3
"""Runs every `curl` example of the HTTP guides against a fresh `wow serve` and writes what it
answered, with what differs from run to run (generated ids, times, durations) masked.

Two builds that answer the guides alike write the same transcript: a change meant to keep
behaviour (a restructuring) is checked by diffing the transcripts of the build before and the
build after.

    .ci/transcript.py target/release/wow > after.txt
    .ci/transcript.py /path/to/earlier/wow > before.txt
    diff before.txt after.txt

Each guide runs on a service of its own (bank for docs/http-api.md, shop for
docs/real-domains.md), on a fresh SQLite file, with the settings the guide names.
"""

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

# (guide, the example the service runs, extra settings)
GUIDES = [
    ("docs/http-api.md", "bank", {"WOW_SNAPSHOT_QUERIES": "true"}),
    ("docs/real-domains.md", "shop", {"WOW_SNAPSHOT_QUERIES": "true"}),
    ("docs/writing-an-aggregate.md", "bank", {}),
]

MASKS = [
    # ULIDs / UUIDs / 26-char ids and the like
    (re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b"), "<ulid>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\b0[0-9a-z]{15,}\b"), "<id>"),
    # epoch milliseconds
    (re.compile(r"\b1[6-9]\d{11}\b"), "<ms>"),
    # durations and latency sums
    (re.compile(r'"(durationMs|elapsedMs|sum|le)":\s*[0-9.e+-]+'), r'"\1":<n>'),
    # Prometheus latency histograms
    (re.compile(r"^(\w+_seconds_(bucket|sum|count)\S*) .*$", re.M), r"\1 <n>"),
]

DROPPED_HEADERS = {"date", "content-length", "retry-after"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def examples(guide):
    """The guide's curl commands, joined over continuation lines (a trailing backslash, or a
    quote still open), in order, without their comments."""
    lines = open(guide, encoding="utf-8").read().split("\n")
    found, current = [], None
    for line in lines:
        stripped = line.strip()
        if current is None:
            if not stripped.startswith("curl "):
                continue
            current = ""
        current += " " + stripped
        if current.endswith("\\"):
            current = current[:-1]
            continue
        try:
            words = shlex.split(current, comments=True)
        except ValueError:
            continue
        found.append(shlex.join(words))
        current = None
    return found


def mask(text):
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


def wait_ready(port, deadline):
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return True
        except Exception:
            time.sleep(0.1)
    return False


def run(binary, guide, example, settings, out):
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, **settings, RUST_LOG="warn", WOW_STORE=f"sqlite://{folder}/t.db")
        server = subprocess.Popen(
            [binary, "serve", "--example", example, "--listen", f"127.0.0.1:{port}"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            if not wait_ready(port, time.time() + 60):
                out.write(f"## {guide}: the service did not start\n")
                return
            out.write(f"## {guide} ({example})\n")
            for command in examples(guide) + ["curl -s localhost:8080/openapi.json"]:
                command = re.sub(r"localhost:\d+|127\.0\.0\.1:\d+", f"127.0.0.1:{port}", command)
                args = shlex.split(command)
                args = [a for a in args if a not in ("-s", "-i", "-sN", "-N")]
                args[1:1] = ["-s", "-i", "--max-time", "10"]
                answer = subprocess.run(args, capture_output=True, text=True).stdout
                head, _, body = answer.replace("\r\n", "\n").partition("\n\n")
                headers = [
                    h for h in head.split("\n")[1:]
                    if h.split(":")[0].lower() not in DROPPED_HEADERS
                ]
                status = head.split("\n")[0]
                try:
                    parsed = json.loads(body)
                    if isinstance(parsed, dict) and "latency" in parsed:
                        parsed["latency"] = "<latency histogram>"
                    body = json.dumps(parsed, sort_keys=True, indent=1)
                except ValueError:
                    pass
                shown = command.replace(f"127.0.0.1:{port}", "HOST")
                out.write(f"\n$ {shown}\n{status}\n" + "\n".join(sorted(headers)) + "\n")
                out.write(mask(body) + "\n")
        finally:
            server.terminate()
            server.wait(timeout=30)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: transcript.py WOW_BINARY")
    for guide, example, settings in GUIDES:
        run(sys.argv[1], guide, example, settings, sys.stdout)


if __name__ == "__main__":
    main()
