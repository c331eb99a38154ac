"""Fresh reads against plain reads (SPEC DS-6): one kept-alive client reads a view of the bank
plainly, with Wow-Fresh-Version and with Wow-Fresh-Request, 3,000 times each per round, three
rounds, the kinds alternating; prints req/s, p50 and p99 per cell and each kind's throughput
ratio to the plain read. Run against `wow serve --example bank` on PORT (default 8097):

    python3 bench/fresh_reads.py PORT
"""
import http.client, json, time, statistics, sys
HOST, PORT = "127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 8097
N = 3000
c = http.client.HTTPConnection(HOST, PORT)
def req(method, path, headers=None, body=None):
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse(); data = r.read(); return r.status, data
hdr = {"Content-Type": "application/json", "Command-Wait-Stage": "PROJECTED"}
import os; run = os.getpid(); ids = [f"fresh-{run}-{i}" for i in range(20)]
for i in ids:
    s, d = req("POST", f"/account/{i}/open", {**hdr, "Command-Request-Id": f"open-{i}"}, json.dumps({"name": "Ann", "balance": 10}))
    assert s == 200, (s, d)
    s, d = req("POST", f"/account/{i}/deposit", {**hdr, "Command-Request-Id": f"dep-{i}"}, json.dumps({"amount": 5}))
    assert s == 200, (s, d)
variants = {
    "plain": lambda i: {},
    "fresh by version": lambda i: {"Wow-Fresh-Version": "2"},
    "fresh by request id": lambda i: {"Wow-Fresh-Request": f"dep-{i}"},
}
results = {k: [] for k in variants}
for rnd in range(3):
    for name, h in variants.items():
        lat = []
        t0 = time.perf_counter()
        for n in range(N):
            i = ids[n % len(ids)]
            a = time.perf_counter()
            s, d = req("GET", f"/account/{i}/view/account_balance", h(i))
            lat.append(time.perf_counter() - a)
            assert s == 200, (name, s, d)
        el = time.perf_counter() - t0
        lat.sort()
        results[name].append((N / el, lat[len(lat)//2] * 1e6, lat[int(len(lat)*0.99)] * 1e6))
for name, rows in results.items():
    print(name, " | ".join(f"{r:,.0f} req/s p50 {p50:.0f} us p99 {p99:.0f} us" for r, p50, p99 in rows))
base = [r[0] for r in results["plain"]]
for name, rows in results.items():
    print(name, "throughput ratio vs plain by round:", [round(r[0] / b, 2) for r, b in zip(rows, base)])
