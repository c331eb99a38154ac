"""A view rebuilt beside the live one (SPEC DS-6), measured: readers read the bank's
`account_balance` view throughout while `POST /rebuilds/account_balance` fills a new generation
from history and swaps to it. Prints the rebuild's time and rate (from its own progress), and
the readers' reads, failures and latency before and during the rebuild.

Fill a store first, e.g. 1,000,000 deposits over 10,000 accounts named `bench-big-N`:

    wow serve --store sqlite://./big.db --listen 127.0.0.1:8098 &
    wow bench --url http://127.0.0.1:8098 --operation deposit --aggregates 10000 \
        --accounts big --count 1000000 --connections 64

then, against the same server:

    python3 bench/rebuild.py 8098 big 10000 [READERS]
"""
import http.client, json, random, statistics, sys, threading, time

HOST = "127.0.0.1"
PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8098
PREFIX = sys.argv[2] if len(sys.argv) > 2 else "big"
ACCOUNTS = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
READERS = int(sys.argv[4]) if len(sys.argv) > 4 else 4
VIEW = "account_balance"


def connect():
    return http.client.HTTPConnection(HOST, PORT, timeout=30)


class Reader(threading.Thread):
    """Reads random accounts' rows until stopped; keeps each phase's latencies and failures."""

    def __init__(self):
        super().__init__(daemon=True)
        self.phase = "before"
        self.latencies = {"before": [], "during": []}
        self.failures = {"before": 0, "during": 0}
        self.stop = False

    def run(self):
        c = connect()
        while not self.stop:
            n = random.randrange(ACCOUNTS)
            phase = self.phase
            started = time.perf_counter()
            c.request("GET", f"/account/bench-{PREFIX}-{n}/view/{VIEW}")
            r = c.getresponse()
            body = r.read()
            if r.status != 200 or b'"state"' not in body:
                self.failures[phase] += 1
            self.latencies[phase].append(time.perf_counter() - started)


def rebuild_progress(c):
    c.request("GET", "/rebuilds")
    r = c.getresponse()
    body = json.loads(r.read())
    return next((x for x in body["rebuilds"] if x["view"] == VIEW), None)


def main():
    readers = [Reader() for _ in range(READERS)]
    for reader in readers:
        reader.start()
    time.sleep(5)
    for reader in readers:
        reader.phase = "during"
    c = connect()
    c.request("POST", f"/rebuilds/{VIEW}")
    r = c.getresponse()
    started = json.loads(r.read())
    assert r.status == 202, (r.status, started)
    t0 = time.perf_counter()
    while True:
        time.sleep(1)
        step = rebuild_progress(c)
        print(
            f"{time.perf_counter() - t0:6.1f}s {step['state']:9} {step['aggregatesDone']}/{step['aggregatesTotal']} "
            f"aggregates, {step['streams']} streams, eta {step.get('etaMs')} ms",
            flush=True,
        )
        if step["state"] in ("SWAPPED", "FAILED"):
            break
    for reader in readers:
        reader.stop = True
    for reader in readers:
        reader.join()
    seconds = step["elapsedMs"] / 1000
    print(f"rebuild: {step['state']}, {step['streams']:,} streams over {step['aggregatesDone']:,} aggregates "
          f"in {seconds:.1f} s ({step['streams'] / seconds:,.0f} streams/s), generation {step['generation']}")
    for phase in ("before", "during"):
        latencies = sorted(x for reader in readers for x in reader.latencies[phase])
        failures = sum(reader.failures[phase] for reader in readers)
        if not latencies:
            continue
        p = lambda q: latencies[min(len(latencies) - 1, int(len(latencies) * q))] * 1e3
        print(f"readers {phase:6}: {len(latencies):,} reads, {failures} failed, "
              f"p50 {p(0.5):.2f} ms, p99 {p(0.99):.2f} ms, max {latencies[-1] * 1e3:.1f} ms")


main()
