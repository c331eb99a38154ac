#!/usr/bin/env python3
"""The failover soak: `wow serve` (bank, PostgreSQL) over HTTP while the primary is lost, round
after round. Outside CI and `cargo test`: run it by hand (docs/reliability.md has its figures).

usage: python3 docs/bench/failover/soak.py path/to/wow [--rounds 10] [--callers 16]
           [--freeze-hold 5] [--settle 5] [--view-patience 120] [--deadline 5]
           [--keep DIR] [--json FILE]
Exit status 0 when nothing was lost, doubled or answered wrong and nothing hung.

What it does, on one machine, as root or as the user that owns the PostgreSQL binaries:

1. A pg_auto_failover formation of its own (Debian's `pg-auto-failover-cli` and
   `postgresql-15-auto-failover`): a monitor and two nodes, node 1 primary and node 2 its
   synchronous standby, on free ports under a temporary directory (never the shared server on
   5432). The monitor is tuned as in `crates/wow-postgres/tests/auto_failover.rs` to notice a
   lost primary within about 2 s.
2. A `wow serve` (bank) on the multi-host URL `pg_autoctl show uri --formation default`
   prints, with the superuser, `schema=soak`, and otherwise the store's defaults
   (`call_timeout_ms` 5000, `connect_timeout` 2 s).
3. Callers (16) that deposit into accounts of their own (two each) and follow the documented
   safe retry (docs/http-api.md): every deposit carries a request id; on a timeout, a 408, a
   5xx or a transport error the caller looks the request up
   (`GET /account/{id}/requests/{requestId}`): `APPENDED` acknowledges it, `IN_FLIGHT` and
   `UNKNOWN` are looked up again, and only `NONE` makes it resend, with the same request id.
   A deposit is acknowledged by a 200 or by a look-up's `APPENDED`.
4. Rounds of failover, the kinds in turn: `kill` (SIGKILL of the primary's keeper and
   PostgreSQL, every process of the node at once, as a lost machine; the node is started again
   once the standby took writes, and rejoins as a standby), `freeze` (SIGSTOP of every process
   of the primary, as a hung machine or a partition; SIGCONT once the standby took writes,
   wow-rs acknowledged again and `--freeze-hold` seconds passed), and `switchover`
   (`pg_autoctl perform switchover`). Between rounds: the formation healthy again (a primary
   and a secondary, reported and assigned; the primary is asked for a `CHECKPOINT` every 10 s
   meanwhile, since a node that rejoins by `pg_basebackup` waits for one) and `--settle`
   seconds of load.
5. At the end: each caller resolves its last deposit; then every account's state
   (`/account/{id}/state`) and history (`/account/{id}/event/...`) must equal its
   acknowledged deposits: none lost, none doubled, each at the version it was acknowledged
   at. A wrong answer is any of: a 500 or another status the docs do not give for a deposit
   or a look-up, a look-up `REJECTED`, an acknowledged deposit missing from history or at
   another version, a deposit in history that no caller acknowledged, a balance that is not
   the sum. The views (`/account/{id}/view`) are then given `--view-patience` seconds to show
   the same; the first account's view lag is sampled every 2 s during the load. Views behind
   are reported apart: a stale view is late, not wrong.

Per round and per kind it reports: the longest time without any acknowledgement (from the
fault on), when the new primary first committed a write (a probe `INSERT` on the standby,
every 50 ms, each bounded by 0.5 s), the time from that to wow-rs's next acknowledgement, the
answers (503, 408, transport errors, look-ups, resends) and the slowest HTTP answer.

Everything it starts (formation, wow serve) is stopped, by process id, and its directory
removed, also on an error or Ctrl-C; `--keep DIR` copies the logs there first.
"""
import argparse
import http.client
import json
import os
import pwd
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

PG_BIN = os.environ.get("WOW_PG_BIN", "/usr/lib/postgresql/15/bin")
PG_AUTOCTL = "/usr/bin/pg_autoctl"
# The monitor's settings of crates/wow-postgres/tests/support/formation.rs: a failover in
# seconds rather than its defaults' tens of seconds.
FAST_MONITOR = [
    "ALTER SYSTEM SET pgautofailover.health_check_period = 500",
    "ALTER SYSTEM SET pgautofailover.health_check_timeout = 1000",
    "ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 200",
    "ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 2000",
    "ALTER SYSTEM SET pgautofailover.primary_demote_timeout = 3000",
    "SELECT pg_reload_conf()",
]
KINDS = ["kill", "freeze", "switchover"]
CLIENT_TIMEOUT = 30.0  # s: an HTTP answer slower than this is a hang
WAIT_TIMEOUT_MS = 10000  # Command-Wait-Timeout of each deposit


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def is_root():
    return os.geteuid() == 0


def descendants(root):
    """Process `root` and every process below it, parents first."""
    parents = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat.rsplit(")", 1)[-1].split()
        if len(rest) > 1:
            parents.append((int(entry), int(rest[1])))
    found = [root]
    index = 0
    while index < len(found):
        found.extend(pid for pid, parent in parents if parent == found[index])
        index += 1
    return found


def signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


class Formation:
    """A monitor and two nodes of its own, under a temporary directory."""

    def __init__(self, keep=None):
        self.dir = tempfile.mkdtemp(prefix="wow-failover-soak-")
        self.keep = keep
        self.path = f"{PG_BIN}:/usr/bin:/bin"
        if is_root():
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self.log_path = os.path.join(self.dir, "pg_autoctl.log")
        self.monitor = None  # (popen, pgdata, port)
        self.nodes = []  # [popen, pgdata, port], index 0 is node 1
        self.others = []  # processes started besides (a node started again replaces its entry)

    # -- running pg_autoctl ------------------------------------------------------------
    def command(self, args):
        prefix = ["runuser", "-u", "postgres", "--"] if is_root() else []
        return prefix + [
            "/usr/bin/env",
            f"PATH={self.path}",
            f"XDG_CONFIG_HOME={self.dir}/config",
            f"XDG_DATA_HOME={self.dir}/share",
            f"XDG_RUNTIME_DIR={self.dir}/run",
            PG_AUTOCTL,
        ] + args

    def spawn(self, args):
        out = open(self.log_path, "a")
        return subprocess.Popen(self.command(args), stdout=out, stderr=out,
                                stdin=subprocess.DEVNULL, start_new_session=True)

    def run(self, args, timeout):
        return subprocess.run(self.command(args), capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout)

    def psql(self, port, sql, database="postgres", timeout=3.0):
        """Runs `sql` on the server at `port`; its rows (`|`-separated), or None on failure."""
        env = dict(os.environ, PGCONNECT_TIMEOUT="1")
        try:
            out = subprocess.run(
                [f"{PG_BIN}/psql", "-X", "-q", "-A", "-t", "-F", "|", "-v", "ON_ERROR_STOP=1",
                 "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", database, "-c", sql],
                capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return None
        if out.returncode != 0:
            return None
        return [line.split("|") for line in out.stdout.splitlines() if line]

    # -- set-up --------------------------------------------------------------------------
    def start(self):
        pgdata = os.path.join(self.dir, "monitor")
        port = free_port()
        popen = self.spawn(["create", "monitor", "--pgdata", pgdata, "--pgport", str(port),
                            "--auth", "trust", "--no-ssl", "--hostname", "127.0.0.1", "--run"])
        self.monitor = (popen, pgdata, port)
        deadline = time.monotonic() + 60
        while self.psql(port, "SELECT 1", "pg_auto_failover") is None:
            if time.monotonic() > deadline:
                raise RuntimeError("the monitor did not start:\n" + self.log_tail())
            time.sleep(0.2)
        for setting in FAST_MONITOR:
            if self.psql(port, setting, "pg_auto_failover") is None:
                raise RuntimeError(f"the monitor refused {setting}")
        for number in (1, 2):
            pgdata = os.path.join(self.dir, f"node{number}")
            node_port = free_port()
            monitor = (f"postgres://autoctl_node@127.0.0.1:{port}/pg_auto_failover"
                       "?sslmode=disable")
            popen = self.spawn(["create", "postgres", "--pgdata", pgdata, "--pgport",
                                str(node_port), "--monitor", monitor, "--auth", "trust",
                                "--no-ssl", "--hostname", "127.0.0.1", "--pg-hba-lan", "--run"])
            self.nodes.append([popen, pgdata, node_port])
            if number == 1:
                self.wait_for(lambda s: s.get(node_port) == ("single", "single"), 90)
            else:
                self.wait_healthy(120)

    def uri(self):
        """The formation's URL as `pg_autoctl show uri --formation default` prints it."""
        out = self.run(["show", "uri", "--formation", "default", "--pgdata", self.monitor[1]], 20)
        if out.returncode != 0:
            raise RuntimeError(f"pg_autoctl show uri failed: {out.stderr}")
        return out.stdout.strip().splitlines()[-1].strip()

    # -- state ---------------------------------------------------------------------------
    def states(self):
        """{node port: (reported state, assigned state)}, as the monitor has them."""
        rows = self.psql(self.monitor[2],
                         "SELECT nodeport, reportedstate, goalstate FROM pgautofailover.node",
                         "pg_auto_failover", timeout=2.0)
        return {int(r[0]): (r[1], r[2]) for r in rows or [] if len(r) == 3}

    def wait_for(self, predicate, patience):
        deadline = time.monotonic() + patience
        while True:
            states = self.states()
            if predicate(states):
                return states
            if time.monotonic() > deadline:
                raise RuntimeError(f"the formation did not get there within {patience} s: "
                                   f"{states}\n{self.log_tail()}")
            time.sleep(0.1)

    def wait_healthy(self, patience):
        """A primary and a secondary, both reported and assigned; (primary, standby) indexes."""
        def healthy(states):
            values = sorted(states.values())
            return values == [("primary", "primary"), ("secondary", "secondary")]
        # A node that rejoins by pg_basebackup waits for a checkpoint of the primary, spread
        # over minutes by default: ask the primary for one now and then.
        nudged = [time.monotonic()]

        def healthy_or_nudge(states):
            if healthy(states):
                return True
            if time.monotonic() - nudged[0] > 10:
                nudged[0] = time.monotonic()
                for port, (reported, _) in states.items():
                    if reported in ("primary", "wait_primary", "single"):
                        self.psql(port, "CHECKPOINT", timeout=5.0)
            return False
        states = self.wait_for(healthy_or_nudge, patience)
        primary = next(i for i, n in enumerate(self.nodes) if states[n[2]][0] == "primary")
        return primary, 1 - primary

    def writable(self, index, patience):
        """When node `index` first commits a write (probed every 50 ms, each within 0.5 s)."""
        port = self.nodes[index][2]
        deadline = time.monotonic() + patience
        sql = "CREATE TABLE IF NOT EXISTS wow_probe (at BIGINT); INSERT INTO wow_probe VALUES (1)"
        while time.monotonic() < deadline:
            if self.psql(port, sql, timeout=0.5) is not None:
                return time.monotonic()
            time.sleep(0.05)
        return None

    def log_tail(self, lines=30):
        try:
            with open(self.log_path) as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    # -- faults --------------------------------------------------------------------------
    def kill(self, index):
        """SIGKILL to every process of node `index` (keeper and PostgreSQL) at once."""
        popen = self.nodes[index][0]
        signal_all(descendants(popen.pid), signal.SIGKILL)
        try:
            popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def restart(self, index):
        """Starts node `index` again (`pg_autoctl run`): it rejoins as a standby."""
        pgdata = self.nodes[index][1]
        self.others.append(self.nodes[index][0])
        self.nodes[index][0] = self.spawn(["run", "--pgdata", pgdata])

    def freeze(self, index):
        signal_all(descendants(self.nodes[index][0].pid), signal.SIGSTOP)

    def thaw(self, index):
        signal_all(descendants(self.nodes[index][0].pid), signal.SIGCONT)

    def switchover(self, index, patience=90):
        out = self.run(["perform", "switchover", "--formation", "default",
                        "--pgdata", self.nodes[index][1]], patience)
        if out.returncode != 0:
            raise RuntimeError(f"switchover failed: {out.stderr}")

    # -- tear-down -----------------------------------------------------------------------
    def stop(self):
        services = [tuple(n) for n in self.nodes] + ([self.monitor] if self.monitor else [])
        popens = [s[0] for s in services] + self.others
        trees = [descendants(p.pid) for p in popens]
        for tree in trees:
            signal_all(tree, signal.SIGCONT)
        for _, pgdata, _ in services:
            try:
                self.run(["stop", "--pgdata", pgdata, "--immediate"], 20)
            except subprocess.TimeoutExpired:
                pass
        for tree in trees:
            left = []
            for pid in tree:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        line = f.read().decode(errors="replace")
                except OSError:
                    continue
                if "pg_autoctl" in line or "postgres" in line or "runuser" in line:
                    left.append(pid)
            signal_all(left, signal.SIGKILL)
        for popen in popens:
            try:
                popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self.keep:
            os.makedirs(self.keep, exist_ok=True)
            shutil.copy(self.log_path, os.path.join(self.keep, "pg_autoctl.log"))
        shutil.rmtree(self.dir, ignore_errors=True)


class Soak:
    """The callers, what they were answered and what they acknowledged."""

    def __init__(self, port, callers):
        self.port = port
        self.callers = callers
        self.accounts = [f"acct-{i:02d}" for i in range(callers * 2)]
        self.stop = threading.Event()
        self.acks = []  # (monotonic time, account, request id, amount, version, via)
        self.answers = []  # (monotonic time, what, status or error, seconds)
        self.wrong = []  # (monotonic time, description)
        self.unresolved = []
        self.resent_after_none = 0
        self.duplicate_after_none = 0
        self.threads = []
        self.view_lag = []  # (monotonic time, versions the first account's view is behind)

    # -- HTTP ----------------------------------------------------------------------------
    def call(self, conn, method, path, what, body=None, headers=None, tagged=False):
        """(connection to reuse or None, status or None, parsed body or None, seconds). With
        `tagged`, the parsed body is paired with the version its `ETag` names (a state's)."""
        started = time.monotonic()
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=CLIENT_TIMEOUT)
            data = None if body is None else json.dumps(body)
            hdrs = dict(headers or {})
            if data is not None:
                hdrs["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=hdrs)
            response = conn.getresponse()
            raw = response.read()
            status = response.status
            try:
                parsed = json.loads(raw) if raw else None
            except ValueError:
                parsed = None
            if tagged:
                parsed = (parsed, tag_version(response.getheader("ETag")))
            if response.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException) as error:
            if conn is not None:
                conn.close()
            elapsed = time.monotonic() - started
            kind = "timeout" if isinstance(error, socket.timeout) else "transport"
            self.answers.append((started, what, kind, elapsed))
            return None, None, (None, None) if tagged else None, elapsed
        elapsed = time.monotonic() - started
        self.answers.append((started, what, status, elapsed))
        return conn, status, parsed, elapsed

    # -- the safe retry ------------------------------------------------------------------
    def deposit(self, conn, account, request_id, amount, give_up):
        """Sends one deposit and resolves it; the connection to reuse."""
        path_cmd = f"/account/{account}/deposit"
        path_lookup = f"/account/{account}/requests/{urllib.parse.quote(request_id, safe='')}"
        headers = {"Command-Request-Id": request_id,
                   "Command-Wait-Timeout": str(WAIT_TIMEOUT_MS)}
        send, after_none = True, False
        while True:
            if send:
                conn, status, body, _ = self.call(conn, "POST", path_cmd, "deposit",
                                                  {"amount": amount}, headers)
                if status == 200 and body and body.get("succeeded") is True:
                    self.ack(account, request_id, amount, body.get("aggregateVersion"), "answer")
                    return conn
                code = (body or {}).get("errorCode") if isinstance(body, dict) else None
                if status == 409 and code == "DuplicateRequestId":
                    if after_none:
                        self.duplicate_after_none += 1
                elif status in (None, 408, 503):
                    pass
                else:
                    self.wrong.append((time.monotonic(),
                                       f"deposit {request_id}: {status} {code} {body}"))
            # The outcome is unknown (or decided before): the look-up decides.
            while True:
                if time.monotonic() > give_up():
                    self.unresolved.append(request_id)
                    return conn
                conn, status, body, _ = self.call(conn, "GET", path_lookup, "lookup")
                answer = (body or {}).get("status") if isinstance(body, dict) else None
                if status == 200 and answer == "APPENDED":
                    self.ack(account, request_id, amount, body.get("version"), "lookup")
                    return conn
                if status == 404 and answer == "NONE":
                    send, after_none = True, True
                    self.resent_after_none += 1
                    break
                if status in (None, 202, 503):
                    time.sleep(0.1)
                    continue
                self.wrong.append((time.monotonic(), f"look-up {request_id}: {status} {body}"))
                time.sleep(0.2)

    def ack(self, account, request_id, amount, version, via):
        self.acks.append((time.monotonic(), account, request_id, amount, version, via))

    def caller(self, index):
        conn = None
        mine = self.accounts[2 * index:2 * index + 2]
        rng = random.Random(index)
        stopped_at = []

        def give_up():
            # Callers never give up during the soak; after it, each has 120 s to resolve.
            if self.stop.is_set():
                if not stopped_at:
                    stopped_at.append(time.monotonic())
                return stopped_at[0] + 120
            return float("inf")

        n = 0
        while not self.stop.is_set():
            n += 1
            account = mine[n % 2]
            conn = self.deposit(conn, account, f"{account}-{n}", rng.randint(1, 1000), give_up)
        if conn is not None:
            conn.close()

    def open_accounts(self):
        conn = None
        for account in self.accounts:
            for _ in range(100):
                conn, status, body, _ = self.call(
                    conn, "POST", f"/account/{account}/open", "open",
                    {"name": account, "balance": 0}, {"Command-Request-Id": f"open-{account}"})
                if status in (200, 409):
                    break
                time.sleep(0.1)
            else:
                raise RuntimeError(f"could not open {account}")

    def start(self):
        self.threads = [threading.Thread(target=self.caller, args=(i,), daemon=True)
                        for i in range(self.callers)]
        self.threads.append(threading.Thread(target=self.sample_views, args=(2.0,), daemon=True))
        for thread in self.threads:
            thread.start()

    def finish(self):
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=180)

    def ack_count(self):
        return len(self.acks)

    def wait_acks(self, after, patience):
        """The time of the first acknowledgement at or after `after`, within `patience` s."""
        deadline = time.monotonic() + patience
        while True:
            acks, first = self.acks, None
            index = len(acks) - 1
            # Appended in about time order (threads race by microseconds): look back 1 s more.
            while index >= 0 and acks[index][0] >= after - 1.0:
                if acks[index][0] >= after and (first is None or acks[index][0] < first):
                    first = acks[index][0]
                index -= 1
            if first is not None or time.monotonic() > deadline:
                return first
            time.sleep(0.02)

    # -- the check -----------------------------------------------------------------------
    def get(self, path, tagged=False):
        for _ in range(50):
            _, status, body, _ = self.call(None, "GET", path, "check", tagged=tagged)
            if status == 200:
                return body
            if status == 404:
                return (None, None) if tagged else None
            time.sleep(0.2)
        raise RuntimeError(f"GET {path} never answered")

    def check(self):
        """Every account against its acknowledged deposits; the problems found."""
        problems = []
        acked = {a: {} for a in self.accounts}
        for _, account, request_id, amount, version, _ in self.acks:
            if request_id in acked[account]:
                problems.append(f"{request_id} acknowledged twice")
            acked[account][request_id] = (amount, version)
        for account in self.accounts:
            mine = acked[account]
            expected_balance = sum(a for a, _ in mine.values())
            state, state_version = self.get(f"/account/{account}/state", tagged=True)
            balance = (state or {}).get("balance")
            if balance != expected_balance:
                problems.append(f"{account}: state balance {balance}, acknowledged "
                                f"{expected_balance}")
            if state_version != len(mine) + 1:
                problems.append(f"{account}: state version {state_version}, "
                                f"acknowledged {len(mine)} deposits after the open")
            history, start = [], 1
            while True:
                page = self.get(f"/account/{account}/event/{start}/{start + 999}") or []
                history.extend(page)
                if len(page) < 1000:
                    break
                start += 1000
            seen = {}
            for stream in history:
                for event in stream.get("body", []):
                    if event.get("name") != "Deposited":
                        continue
                    request_id = stream.get("requestId")
                    if request_id in seen:
                        problems.append(f"{account}: {request_id} applied twice")
                    seen[request_id] = (event.get("body", {}).get("amount"), stream.get("version"))
            for request_id, (amount, version) in mine.items():
                found = seen.get(request_id)
                if found is None:
                    problems.append(f"{account}: acknowledged {request_id} (v{version}) lost")
                elif found != (amount, version):
                    problems.append(f"{account}: {request_id} acknowledged as "
                                    f"{(amount, version)}, history has {found}")
            for request_id in seen.keys() - mine.keys():
                problems.append(f"{account}: {request_id} in history, never acknowledged")
            history_balance = sum(a for a, _ in seen.values() if isinstance(a, int))
            if history_balance != expected_balance:
                problems.append(f"{account}: history sums to {history_balance}, acknowledged "
                                f"{expected_balance}")
        return problems

    def views(self, patience):
        """Waits until every account's view (`/account/{id}/view`) shows its acknowledged
        balance and version; (seconds it took or None, accounts still behind)."""
        expected = {a: [0, 1] for a in self.accounts}
        for _, account, _, amount, _, _ in self.acks:
            expected[account][0] += amount
            expected[account][1] += 1
        started = time.monotonic()
        behind = dict(expected)
        while True:
            for account in list(behind):
                view = self.get(f"/account/{account}/view") or {}
                if [view.get("balance"), view.get("version")] == expected[account]:
                    del behind[account]
                else:
                    behind[account] = {"view_version": view.get("version"),
                                       "state_version": expected[account][1]}
            if not behind:
                return round(time.monotonic() - started, 1), {}
            if time.monotonic() - started > patience:
                return None, behind
            time.sleep(1.0)

    def sample_views(self, every):
        """Every `every` s while the load runs: how far the first account's view is behind
        its state (versions)."""
        conn = None
        while not self.stop.wait(every):
            conn, _, (state, state_version), _ = self.call(
                conn, "GET", "/account/acct-00/state", "sample", tagged=True)
            conn, _, view, _ = self.call(conn, "GET", "/account/acct-00/view", "sample")
            if isinstance(state, dict) and isinstance(view, dict):
                lag = (state_version or 0) - (view.get("version") or 0)
                self.view_lag.append((time.monotonic(), lag))


def tag_version(tag):
    """The version a state's `ETag` names (`"3"`: 3); None without one."""
    if tag and len(tag) > 2 and tag[0] == tag[-1] == '"' and tag[1:-1].isdigit():
        return int(tag[1:-1])
    return None


def longest_gap(times, start, end):
    inside = [t for t in times if start <= t <= end]
    points = [start] + inside + [end]
    return max(b - a for a, b in zip(points, points[1:]))


def summarize_answers(answers, start, end):
    """Counts of answers by (what, status) in [start, end], and the slowest of each what."""
    counts, slowest = {}, {}
    for t, what, status, elapsed in answers:
        if start <= t <= end:
            key = f"{what}:{status}"
            counts[key] = counts.get(key, 0) + 1
            slowest[what] = round(max(slowest.get(what, 0.0), elapsed), 3)
    return counts, slowest


def serve(binary, url, port, directory):
    log_file = open(os.path.join(directory, "serve.log"), "a")
    env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info"))
    popen = subprocess.Popen([binary, "serve", "--store", url, "--listen", f"127.0.0.1:{port}"],
                             stdout=log_file, stderr=log_file, stdin=subprocess.DEVNULL,
                             env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            raise RuntimeError("wow serve ended at start; see serve.log")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                conn.close()
                return popen
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("wow serve did not answer /health within 60 s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("wow", help="the wow binary (release)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--callers", type=int, default=16)
    parser.add_argument("--freeze-hold", type=float, default=5.0,
                        help="seconds a frozen primary stays frozen after wow-rs acknowledges again")
    parser.add_argument("--settle", type=float, default=5.0,
                        help="seconds of load between a healthy formation and the next round")
    parser.add_argument("--view-patience", type=float, default=120.0,
                        help="seconds the views have to catch up once the load stops")
    parser.add_argument("--deadline", type=float, default=5.0,
                        help="the store's call deadline (s), to list the answers slower than it")
    parser.add_argument("--keep", help="a directory to copy the logs to")
    parser.add_argument("--json", help="a file to write the figures to, as JSON")
    args = parser.parse_args()

    def interrupted(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, interrupted)

    formation = Formation(args.keep)
    wow = None
    rounds = []
    try:
        log(f"formation under {formation.dir}")
        formation.start()
        uri = formation.uri()
        log(f"pg_autoctl show uri --formation default: {uri}")
        # The formation's URL, with a user that exists and our schema.
        url = uri.replace("postgres://", "postgres://postgres@", 1) \
            if "@" not in uri.split("?")[0] else uri
        url += ("&" if "?" in url else "?") + "schema=soak"
        port = free_port()
        wow = serve(args.wow, url, port, formation.dir)
        log(f"wow serve on 127.0.0.1:{port}, store {url}")
        soak = Soak(port, args.callers)
        soak.open_accounts()
        soak.start()
        began = time.monotonic()
        began_wall = time.time()
        time.sleep(args.settle)
        for number in range(1, args.rounds + 1):
            kind = KINDS[(number - 1) % len(KINDS)]
            primary, standby = formation.wait_healthy(120)
            acks_before = soak.ack_count()
            log(f"round {number}: {kind} of node {primary + 1} "
                f"({soak.ack_count()} acknowledged so far)")
            probe = {}
            prober = threading.Thread(
                target=lambda: probe.setdefault("at", formation.writable(standby, 120)))
            t0 = time.monotonic()
            if kind == "switchover":
                prober.start()
                formation.switchover(primary)
                prober.join()
            elif kind == "kill":
                formation.kill(primary)
                prober.start()
                prober.join()
                # Started again once the standby took writes: it rejoins as a standby.
                formation.restart(primary)
            else:
                formation.freeze(primary)
                prober.start()
                prober.join()
                if probe.get("at") is not None:
                    soak.wait_acks(probe["at"], 60)
                time.sleep(args.freeze_hold)
                formation.thaw(primary)
            writable_at = probe.get("at")
            if writable_at is None:
                raise RuntimeError(f"round {number}: the standby never took writes\n"
                                   + formation.log_tail())
            first_ack = soak.wait_acks(writable_at, 120)
            healthy_primary, _ = formation.wait_healthy(180)
            healthy_at = time.monotonic()
            time.sleep(args.settle)
            end = time.monotonic()
            times = [a[0] for a in soak.acks if t0 <= a[0] <= end]
            counts, slowest = summarize_answers(soak.answers, t0, end)
            result = {
                "round": number,
                "kind": kind,
                "old_primary": primary + 1,
                "new_primary": healthy_primary + 1,
                "longest_without_acks_s": round(longest_gap(times, t0, end), 3),
                "new_primary_writable_after_s": round(writable_at - t0, 3),
                "acks_again_after_writable_s":
                    None if first_ack is None else round(first_ack - writable_at, 3),
                "formation_healthy_after_s": round(healthy_at - t0, 3),
                "acknowledged_in_round": soak.ack_count() - acks_before,
                "answers": counts,
                "slowest_answer_s": slowest,
            }
            log(json.dumps(result))
            result.update(_t0=t0, _end=end)
            rounds.append(result)
        soak.finish()
        ended = time.monotonic()
        log(f"load stopped; {soak.ack_count()} acknowledged; checking every account")
        problems = soak.check()
        log(f"state and history checked ({len(problems)} problems); waiting for the views")
        views_after, views_behind = soak.views(args.view_patience)
        counts, slowest = summarize_answers(soak.answers, began, ended)
        hangs = [a for a in soak.answers if a[3] >= CLIENT_TIMEOUT - 0.5]
        # Answers slower than the store's call deadline (5 s by default): when (UTC), what,
        # the status, how long.
        slow = sorted((a for a in soak.answers if a[3] > args.deadline),
                      key=lambda a: -a[3])[:20]
        slow = [(time.strftime("%H:%M:%S", time.gmtime(began_wall + a[0] - began))
                 + f".{int(((began_wall + a[0] - began) % 1) * 1000):03d}", a[1], a[2],
                 round(a[3], 3)) for a in slow]
        report = {
            "callers": args.callers,
            "accounts": len(soak.accounts),
            "rounds": rounds,
            "view_lag_by_round": [
                {"round": r["round"], "max_view_lag_versions": max(
                    [lag for t, lag in soak.view_lag
                     if r["_t0"] <= t <= r["_end"]] or [None], key=lambda x: x or 0)}
                for r in rounds],
            "acknowledged": soak.ack_count(),
            "acknowledged_by_lookup": sum(1 for a in soak.acks if a[5] == "lookup"),
            "resent_after_none": soak.resent_after_none,
            "duplicate_after_none": soak.duplicate_after_none,
            "answers": counts,
            "slowest_answer_s": slowest,
            "hangs": len(hangs),
            "slower_than_deadline": slow,
            "unresolved": soak.unresolved,
            "wrong_answers": [w[1] for w in soak.wrong][:50],
            "wrong_answer_count": len(soak.wrong),
            "problems": problems[:50],
            "problem_count": len(problems),
            "load_seconds": round(ended - began, 1),
            "views_caught_up_after_load_s": views_after,
            "views_behind": views_behind,
            "view_lag_samples": [(round(t - began, 1), lag) for t, lag in soak.view_lag],
        }
        for r in rounds:
            r.pop("_t0"), r.pop("_end")
        by_kind = {}
        for kind in KINDS:
            mine = [r for r in rounds if r["kind"] == kind]
            if not mine:
                continue
            gaps = [r["longest_without_acks_s"] for r in mine]
            again = [r["acks_again_after_writable_s"] for r in mine
                     if r["acks_again_after_writable_s"] is not None]
            promote = [r["new_primary_writable_after_s"] for r in mine]
            by_kind[kind] = {
                "rounds": len(mine),
                "acknowledged": sum(r["acknowledged_in_round"] for r in mine),
                "longest_without_acks_max_s": max(gaps),
                "longest_without_acks_median_s": round(statistics.median(gaps), 3),
                "writable_after_median_s": round(statistics.median(promote), 3),
                "acks_again_after_writable_max_s": max(again) if again else None,
                "acks_again_after_writable_median_s":
                    round(statistics.median(again), 3) if again else None,
                "slowest_deposit_s": max(r["slowest_answer_s"].get("deposit", 0) for r in mine),
                "slowest_lookup_s": max(r["slowest_answer_s"].get("lookup", 0) for r in mine),
            }
        report["by_kind"] = by_kind
        print(json.dumps(report, indent=2), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=2)
        ok = not problems and not soak.wrong and not soak.unresolved and not hangs
        log("HELD: nothing lost, nothing doubled, no wrong answer" if ok
            else "VIOLATED: see problems / wrong_answers above")
        log(f"views: caught up {views_after} s after the load stopped" if views_after is not None
            else f"views: {len(views_behind)} accounts still behind {args.view_patience} s "
                 "after the load stopped")
        return 0 if ok else 1
    finally:
        if wow is not None:
            wow.send_signal(signal.SIGTERM)
            try:
                wow.wait(timeout=20)
            except subprocess.TimeoutExpired:
                wow.kill()
                wow.wait()
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                shutil.copy(os.path.join(formation.dir, "serve.log"),
                            os.path.join(args.keep, "serve.log"))
        formation.stop()


if __name__ == "__main__":
    sys.exit(main())
