#!/usr/bin/env python3
"""The distributed chaos run: one gateway and two processors (`wow serve --role ...`, the bank,
PostgreSQL and NATS) under load while processors, the gateway and NATS are killed, round after
round. Outside CI and `cargo test`: run it by hand (docs/benchmarks.md has its figures).

usage: python3 docs/bench/chaos/run.py path/to/wow [--rounds 6] [--callers 16] [--settle 10]
           [--pg postgres://postgres@127.0.0.1:5432] [--nats-server /usr/sbin/nats-server]
           [--keep DIR] [--json FILE]
Exit status 0 when nothing was lost, doubled or answered wrong and nothing hung.

What it does, on one machine:

1. A NATS server of its own (JetStream, on a free port, its store under a temporary
   directory: the shared server on 4222 is never touched) and a fresh PostgreSQL database
   `wowchaos` on `--pg` (dropped at the end).
2. Two processors and a gateway on free ports, each with `WOW_NATS_URL` and a namespace of its
   own; the load starts once every partition is owned.
3. The callers of the failover soak (docs/bench/failover/soak.py, imported: deposits with a
   request id, a look-up on any doubt, a resend only on `NONE`).
4. Rounds, the kinds in turn: `processor` (SIGKILL of one processor, the two in turn; started
   again once the other owns every partition), `gateway` (SIGKILL of the gateway, started again
   at once on the same port), `nats` (SIGKILL of the NATS server, started again one second
   later on the same port and store). `--settle` seconds of load between rounds.
5. At the end each caller resolves its last deposit, and every account's state and history
   must equal its acknowledged deposits (the soak's check).

Per round it reports: the longest time without any acknowledgement from the fault on, and
the longest any account waited for its next one (the callers deposit all the time, so that
is how long the slowest aggregate went unserved); for a processor, how long some partition
had no live owner (every processor's `/health` is read
every 50 ms), and the killed processor's time from its start to answering `/health` (its
port open) and to owning a partition again; for the gateway, its time to answer again. Over
the run: acknowledgements per 10 s window, first and last 30 s compared.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "failover"))
from soak import Soak, free_port, log  # noqa: E402  (the soak's callers and check)

KINDS = ["processor", "gateway", "nats"]


def health(port, timeout=0.5):
    """`/health`'s JSON of the process on `port`, or None when it does not answer."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        conn.request("GET", "/health")
        response = conn.getresponse()
        body = response.read()
        conn.close()
        if response.status != 200:
            return None
        return json.loads(body)
    except (OSError, ValueError, http.client.HTTPException):
        return None


def node_of(report):
    return ((report or {}).get("details") or {}).get("node") or {}


class Deployment:
    """The NATS server, the two processors and the gateway, each a process of its own."""

    def __init__(self, wow, pg, nats_server, directory):
        self.wow, self.pg, self.nats_server, self.dir = wow, pg, nats_server, directory
        self.nats_port = free_port()
        self.namespace = f"chaos{os.getpid()}"
        self.processor_ports = [free_port(), free_port()]
        self.gateway_port = free_port()
        self.procs = {}
        self.url = f"{pg}/wowchaos"

    def psql(self, sql):
        subprocess.run(["psql", f"{self.pg}/postgres", "-qAt", "-c", sql], check=True,
                       stdout=subprocess.DEVNULL,
                       env=dict(os.environ, PGOPTIONS="--client-min-messages=warning"))

    def start_nats(self):
        log_file = open(os.path.join(self.dir, "nats.log"), "a")
        self.procs["nats"] = subprocess.Popen(
            [self.nats_server, "-a", "127.0.0.1", "-p", str(self.nats_port), "-js",
             "-sd", os.path.join(self.dir, "jetstream")],
            stdout=log_file, stderr=log_file, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socketless_connect(self.nats_port):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the NATS server did not listen within 10 s")

    def start_wow(self, name):
        """Starts `name` (`p0`, `p1` or `gateway`); returns when it is spawned."""
        role, port = (("gateway", self.gateway_port) if name == "gateway"
                      else ("processor", self.processor_ports[int(name[1])]))
        log_file = open(os.path.join(self.dir, f"{name}.log"), "a")
        env = dict(os.environ, WOW_NATS_URL=f"nats://127.0.0.1:{self.nats_port}",
                   WOW_NATS_NAMESPACE=self.namespace,
                   RUST_LOG=os.environ.get("RUST_LOG", "info"))
        self.procs[name] = subprocess.Popen(
            [self.wow, "serve", "--role", role, "--store", self.url,
             "--listen", f"127.0.0.1:{port}"],
            stdout=log_file, stderr=log_file, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True)

    def port_of(self, name):
        return self.gateway_port if name == "gateway" else self.processor_ports[int(name[1])]

    def wait_answering(self, name, patience=60):
        """Seconds until `name` answers `/health`, or None."""
        started = time.monotonic()
        while time.monotonic() - started < patience:
            if self.procs[name].poll() is not None:
                raise RuntimeError(f"{name} ended; see {name}.log")
            if health(self.port_of(name)) is not None:
                return time.monotonic() - started
            time.sleep(0.02)
        return None

    def owned(self, names=("p0", "p1")):
        """Partition count, and the partitions the live processors among `names` own."""
        count, owned = None, set()
        for name in names:
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            node = node_of(health(self.port_of(name), timeout=0.3))
            count = node.get("partitionCount", count)
            owned.update(node.get("partitions") or [])
        return count, owned

    def wait_all_owned(self, patience=60):
        """Seconds until every partition has a live owner, or None."""
        started = time.monotonic()
        while time.monotonic() - started < patience:
            count, owned = self.owned()
            if count is not None and len(owned) >= count:
                return time.monotonic() - started
            time.sleep(0.05)
        return None

    def kill(self, name):
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def start(self):
        self.psql("DROP DATABASE IF EXISTS wowchaos WITH (FORCE)")
        self.psql("CREATE DATABASE wowchaos")
        self.start_nats()
        for name in ("p0", "p1", "gateway"):
            self.start_wow(name)
            if self.wait_answering(name) is None:
                raise RuntimeError(f"{name} did not answer /health within 60 s")
        if self.wait_all_owned() is None:
            raise RuntimeError("the partitions were not all owned within 60 s")

    def stop(self, keep=None):
        for name, proc in self.procs.items():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    os.killpg(proc.pid, signal.SIGKILL)
        if keep:
            shutil.copytree(self.dir, keep, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("jetstream"))
        try:
            self.psql("DROP DATABASE IF EXISTS wowchaos WITH (FORCE)")
        except subprocess.CalledProcessError:
            pass


class socketless_connect:
    """A TCP connection to 127.0.0.1:`port`, closed on exit (raises OSError if refused)."""

    def __init__(self, port):
        import socket
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=0.5)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.sock.close()


def gap_from(soak, t0, patience=120):
    """Seconds from `t0` to the first acknowledgement after it (the service's gap)."""
    first = soak.wait_acks(t0, patience)
    return None if first is None else round(first - t0, 2)


def unowned_for(deployment, t0, patience=60):
    """Seconds from `t0` until every partition has a live owner again."""
    seconds = deployment.wait_all_owned(patience)
    return None if seconds is None else round(time.monotonic() - t0, 2)


def run_round(deployment, soak, number, kind, victim):
    figures = {"round": number, "kind": kind}
    t0 = time.monotonic()
    if kind == "processor":
        name = f"p{victim}"
        figures["victim"] = name
        deployment.kill(name)
        figures["partitions_unowned_s"] = unowned_for(deployment, t0)
        figures["no_ack_s"] = gap_from(soak, t0)
        deployment.start_wow(name)
        started = time.monotonic()
        answering = deployment.wait_answering(name)
        figures["restart_to_listen_s"] = None if answering is None else round(answering, 2)
        while time.monotonic() - started < 60:
            if deployment.owned((name,))[1]:
                figures["restart_to_own_s"] = round(time.monotonic() - started, 2)
                break
            time.sleep(0.05)
    elif kind == "gateway":
        deployment.kill("gateway")
        deployment.start_wow("gateway")
        answering = deployment.wait_answering("gateway")
        figures["restart_to_listen_s"] = None if answering is None else round(answering, 2)
        figures["no_ack_s"] = gap_from(soak, t0)
    else:
        deployment.kill("nats")
        time.sleep(1.0)
        deployment.start_nats()
        figures["partitions_unowned_s"] = unowned_for(deployment, t0)
        figures["no_ack_s"] = gap_from(soak, t0)
    return figures


def longest_wait(soak, t0):
    """Seconds from `t0` until the last account to be acknowledged again was (every caller
    deposits all the time, so an account waits only while its aggregate is not served)."""
    first = {}
    for t, account, *_ in soak.acks:
        if t >= t0 and (account not in first or t < first[account]):
            first[account] = t
    if len(first) < len(soak.accounts):
        return None
    return round(max(first.values()) - t0, 2)


def windows(soak, began, ended, every=10.0):
    counts = []
    t = began
    while t + every <= ended:
        counts.append(sum(1 for a in soak.acks if t <= a[0] < t + every))
        t += every
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("wow", help="the wow binary (release)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--callers", type=int, default=16)
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds of load before the first round and between rounds")
    parser.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--nats-server", default=shutil.which("nats-server") or
                        "/usr/sbin/nats-server")
    parser.add_argument("--keep", help="a directory to copy the logs to")
    parser.add_argument("--json", help="a file to write the figures to, as JSON")
    args = parser.parse_args()

    def interrupted(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, interrupted)

    directory = tempfile.mkdtemp(prefix="wow-chaos-")
    deployment = Deployment(os.path.abspath(args.wow), args.pg, args.nats_server, directory)
    rounds, problems = [], []
    try:
        deployment.start()
        log(f"gateway on {deployment.gateway_port}, processors on {deployment.processor_ports}, "
            f"NATS on {deployment.nats_port}, logs under {directory}")
        soak = Soak(deployment.gateway_port, args.callers)
        soak.open_accounts()
        soak.start()
        began = time.monotonic()
        time.sleep(args.settle)
        for number in range(1, args.rounds + 1):
            kind = KINDS[(number - 1) % len(KINDS)]
            victim = (number - 1) // len(KINDS) % 2
            log(f"round {number}: {kind} ({soak.ack_count()} acknowledged so far)")
            t0 = time.monotonic()
            figures = run_round(deployment, soak, number, kind, victim)
            time.sleep(args.settle)
            figures["longest_account_wait_s"] = longest_wait(soak, t0)
            log(f"  {figures}")
            rounds.append(figures)
        ended = time.monotonic()
        soak.finish()
        problems = soak.check()
        per_window = windows(soak, began, ended)
        first, last = sum(per_window[:3]), sum(per_window[-3:])
        summary = {
            "rounds": rounds,
            "acknowledged": soak.ack_count(),
            "acks_per_10s": per_window,
            "last_30s_over_first_30s": round(last / first, 2) if first else None,
            "problems": problems,
        }
        print(json.dumps(summary, indent=2))
        if args.json:
            with open(args.json, "w") as out:
                json.dump(summary, out, indent=2)
    finally:
        deployment.stop(args.keep)
        shutil.rmtree(directory, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
