#!/usr/bin/env python3
"""Attacks on a running `wow serve` (bank), each beside a victim that measures its latency.

usage: attacks.py PID PORT ATTACK   (run.sh beside it seeds a store and runs each attack)
The attacker runs in a process of its own and connects from 127.0.0.1; the victim connects
from 127.0.0.2 (another client address). The victim's latency is measured for 3 s alone, then
for 8 s beside the attack; the server's RSS before, at its highest, and 2 s after.
Prints one JSON line per attack.
"""
import asyncio, json, sys, time

HOST = "127.0.0.1"


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0


async def request(port, method, path, body=None, tenant="t1", src="127.0.0.2", timeout=60):
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(HOST, port, local_addr=(src, 0)), timeout)
    try:
        data = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nCommand-Tenant-Id: {tenant}\r\nConnection: close\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        writer.write(head.encode() + b"\r\n" + data)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(-1), timeout)
        status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
        return status, answer
    finally:
        writer.close()


async def victim(port, stop, latencies, kind):
    while not stop.is_set():
        start = time.perf_counter()
        try:
            if kind == "state":
                status, _ = await request(port, "GET", "/account/v-1/state", tenant="victim")
            elif kind == "query":
                status, _ = await request(port, "POST", "/account/event/list",
                                          {"condition": {"field": "aggregateId", "operator": "EQ", "value": "v-1"}, "limit": 5},
                                          tenant="victim")
            elif kind == "deposit":
                status, _ = await request(port, "POST", "/account/v-1/deposit", {"amount": 1}, tenant="victim")
            else:
                status, _ = await request(port, "GET", "/health", tenant="victim")
            latencies.append((time.perf_counter() - start) * 1000 if status in (200,) else float("nan"))
        except Exception:
            latencies.append(float("nan"))
        await asyncio.sleep(0.02)


def pct(values, p):
    ok = sorted(v for v in values if v == v)
    if not ok:
        return None
    return round(ok[min(len(ok) - 1, int(len(ok) * p))], 1)


async def measure(pid, port, kind, attack, seconds=8):
    base = []
    stop = asyncio.Event()
    t = asyncio.create_task(victim(port, stop, base, kind))
    await asyncio.sleep(3)
    stop.set(); await t
    rss_before = rss_mb(pid)
    during = []
    stop = asyncio.Event()
    t = asyncio.create_task(victim(port, stop, during, kind))
    rss_max = rss_before
    attack_task = asyncio.create_task(attack())
    end = time.time() + seconds
    while time.time() < end:
        rss_max = max(rss_max, rss_mb(pid))
        await asyncio.sleep(0.2)
    stop.set(); await t
    attack_task.cancel()
    try:
        await attack_task
    except BaseException:
        pass
    await asyncio.sleep(2)
    rss_after = rss_mb(pid)
    failed = sum(1 for v in during if v != v)
    return {"victim": kind, "base_p50": pct(base, .5), "base_p99": pct(base, .99),
            "p50": pct(during, .5), "p99": pct(during, .99), "victim_failed": failed, "victim_n": len(during),
            "rss_before": round(rss_before), "rss_max": round(rss_max), "rss_after": round(rss_after)}


async def forever(make):
    while True:
        try:
            await make()
        except asyncio.CancelledError:
            raise
        except Exception:
            await asyncio.sleep(0.05)


async def main():
    pid, port, attack = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    held = []

    async def projection_bomb():
        paths = [f"body.f{i}.g{i}" for i in range(3990)]
        body = {"projection": {"include": paths}, "limit": 1000}
        await asyncio.gather(*[forever(lambda: request(port, "POST", "/account/event/list", body, tenant="t1", src="127.0.0.1")) for _ in range(2)])

    async def history_unread():
        for _ in range(100):
            r, w = await asyncio.open_connection(HOST, port, local_addr=("127.0.0.1", 0))
            w.write(b"GET /account/hot/event/1/100000000 HTTP/1.1\r\nHost: x\r\nCommand-Tenant-Id: t1\r\n\r\n")
            held.append((r, w))
        await asyncio.sleep(3600)

    async def time_travel():
        now = int(time.time() * 1000)
        await asyncio.gather(*[forever(lambda: request(port, "GET", f"/account/hot/state/time/{now}", tenant="t1", src="127.0.0.1")) for _ in range(40)])

    async def two_tenants():
        heavy = [{"field": "body", "operator": "ELEM_MATCH", "children": [{"field": "body.balance", "operator": "GT", "value": 1000000 + i}]} for i in range(31)]
        body = {"condition": {"operator": "OR", "children": heavy}, "limit": 1000}
        await asyncio.gather(*[forever(lambda t=t: request(port, "POST", "/account/event/list", body, tenant=t, src="127.0.0.1")) for t in ("a1", "a2") for _ in range(4)])

    async def idle_flood():
        async def one():
            while True:
                try:
                    r, w = await asyncio.open_connection(HOST, port, local_addr=("127.0.0.1", 0))
                    await r.read(-1)   # held until the server drops it, then reopened
                    w.close()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    await asyncio.sleep(0.01)
        await asyncio.gather(*[one() for _ in range(2000)])

    attacks = {"projection_bomb": (projection_bomb, "health"), "history_unread": (history_unread, "deposit"),
               "time_travel": (time_travel, "state"), "two_tenants": (two_tenants, "query"),
               "idle_flood": (idle_flood, "health")}
    if attack.startswith("only:"):
        await attacks[attack[5:]][0]()
        return
    make, kind = attacks[attack]

    async def in_another_process():
        process = await asyncio.create_subprocess_exec(sys.executable, __file__, str(pid), str(port), "only:" + attack)
        try:
            await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()

    result = await measure(pid, port, kind, in_another_process)
    result["attack"] = attack
    for _, w in held:
        w.close()
    print(json.dumps(result), flush=True)

asyncio.run(main())
