#!/usr/bin/env python3
"""Seeds a running bank: t1/hot with N deposits, tenants a1, a2 with A accounts x 2 streams, victim/v-1."""
import http.client, json, sys, threading
port, hot, accounts = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

def post(conn, path, body, tenant):
    data = json.dumps(body)
    conn.request("POST", path, data, {"Content-Type": "application/json", "Command-Tenant-Id": tenant})
    r = conn.getresponse(); r.read()
    if r.status != 200:
        raise SystemExit(f"{path}: {r.status}")

c = http.client.HTTPConnection("127.0.0.1", port)
post(c, "/account/hot/open", {"name": "hot", "balance": 0}, "t1")
post(c, "/account/v-1/open", {"name": "v", "balance": 0}, "victim")

def hot_deposits():
    c = http.client.HTTPConnection("127.0.0.1", port)
    for _ in range(hot):
        post(c, "/account/hot/deposit", {"amount": 1}, "t1")

def tenant_accounts(tenant, part, parts):
    c = http.client.HTTPConnection("127.0.0.1", port)
    for i in range(part, accounts, parts):
        post(c, f"/account/acc-{i:05}/open", {"name": f"n{i}", "balance": i}, tenant)
        post(c, f"/account/acc-{i:05}/deposit", {"amount": 1}, tenant)

threads = [threading.Thread(target=hot_deposits)]
threads += [threading.Thread(target=tenant_accounts, args=(t, p, 4)) for t in ("a1", "a2") for p in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print("seeded")
