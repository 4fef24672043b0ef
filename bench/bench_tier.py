"""Several schedulers on one queue: 1, 2 and 3 ``asyncsched serve`` processes, end to end.

The cloud of ``bench.bench_candidates`` (``--providers`` compute nodes COPYed into the real
Placement's database, the same hosts in a nova database, the Placement mirror on), with
Placement given ``--workers`` gunicorn workers so that its claim floor is not the first wall.
For each count of daemons (all consuming nova's ``scheduler`` topic on one vhost, the overcommit
guard on, as deployed), real oslo.messaging callers send:

- **throughput**: ``--boots`` one-instance boots from ``--callers`` threads at once: boots/s
  and latency;
- **tight**: ``--tight`` one-slot hosts (the only ones with the disk a tight flavor asks for:
  one instance each) and as many one-instance boots at once: how many were placed, how many
  got NoValidHost, the guard's races and back-outs (summed from the daemons' health files),
  the *lost slots* (boots refused while a tight slot was left free), providers left over
  capacity (must be 0), the claims Placement refused (409) and the retries that waited for
  the mirror's refresh a refusal asked for (and those that gave up at its bound). Then the
  tight hosts are emptied through Placement's API.

Placement's own claim floor at ``--callers`` in flight (PUTs, and claims sharing POSTs as the
daemons send them) is measured in the same run, on the same cloud.

    .venv/bin/python -m bench.bench_tier [--providers 10000] [--daemons 1,2,3] [--workers 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
import uuid as uuidlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import asyncpg

from bench.bench_candidates import (
    Callers,
    Serve,
    claim_rate,
    daemon_texts,
    heartbeat,
    p50,
    pct,
    pg_in_use,
    prepare_cloud,
    progress,
)
from bench.cpu_share import CpuMeter, Pids, me, pg_backends_of, tree
from bench.placement_seed import SeededProvider, plan
from tests.support import broker
from tests.support.nova_db import NovaDB
from tests.support.oslo_caller import request_spec_primitive
from tests.support.placement_server import PlacementServer

TIGHT_DISK_GB = 10000  # no ordinary host has it (at most 6,000): one tight instance per host
TIGHT_FLAVOR: dict[str, Any] = {"vcpus": 1, "memory_mb": 512, "root_gb": TIGHT_DISK_GB}
GUARD_KEYS = ("raced", "backed_out", "kept_after_race", "confirmed")
# the claims Placement refused or the guard backed out (placement), and the retries that
# waited for the mirror's refresh a refusal asked for (candidates)
CLAIM_KEYS = (
    ("placement", "claims_failed"),
    ("candidates", "refusal_waits"),
    ("candidates", "refusal_timeouts"),
)


def tight_hosts(n: int) -> list[SeededProvider]:
    return [
        SeededProvider(str(uuidlib.uuid4()), f"tight-{i:04d}", 32, 131072, TIGHT_DISK_GB)
        for i in range(n)
    ]


def guard_stats(daemons: list[Serve]) -> dict[str, int]:
    """The guard's counters and the claim refusals, summed over the daemons; ``refused`` is
    what Placement itself refused (409 after the client's retries), not the back-outs."""
    out = dict.fromkeys(GUARD_KEYS + tuple(k for _, k in CLAIM_KEYS), 0)
    for d in daemons:
        parts = d.health().get("components") or {}
        g = (parts.get("placement") or {}).get("overcommit_guard")
        for k in GUARD_KEYS:
            out[k] += int((g or {}).get(k, 0))
        for part, k in CLAIM_KEYS:
            out[k] += int((parts.get(part) or {}).get(k, 0))
    out["refused"] = out["claims_failed"] - out["backed_out"]
    return out


def minus(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: a[k] - b.get(k, 0) for k in a}


class Boots(Callers):
    """The bench's callers; a failed boot is counted by its error type, not raised."""

    def try_boot(self, flavor: dict[str, Any]) -> tuple[float, str]:
        c = self.client()
        who = getattr(self._local, "tenant", None)
        tenant = {} if who is None else {"project_id": who[0], "user_id": who[1]}
        body = request_spec_primitive(num_instances=1, group_policy=None, **flavor, **tenant)
        t0 = time.perf_counter()
        try:
            c.select_destinations(body, [str(uuidlib.uuid4())])
        except Exception as exc:  # NoValidHost arrives as a RemoteError
            return time.perf_counter() - t0, str(getattr(exc, "exc_type", type(exc).__name__))
        return time.perf_counter() - t0, "ok"


def concurrently(boots: Boots, n: int, callers: int, flavor: dict[str, Any]) -> dict[str, Any]:
    with ThreadPoolExecutor(callers) as pool:
        connected = threading.Barrier(callers)

        def connect(_: int) -> None:
            boots.client().ping("bench")
            connected.wait(120)

        list(pool.map(connect, range(callers)))
        t0 = time.perf_counter()
        res = list(pool.map(lambda _: boots.try_boot(flavor), range(n)))
        took = time.perf_counter() - t0
    lat = [t for t, _ in res]
    outcomes: dict[str, int] = {}
    for _, what in res:
        outcomes[what] = outcomes.get(what, 0) + 1
    return {
        "boots_s": n / took,
        "p50_ms": p50(lat) * 1000,
        "p90_ms": pct(lat, 0.9) * 1000,
        "outcomes": outcomes,
    }


async def tight_state(pdsn: str, tight: list[SeededProvider]) -> tuple[list[str], int]:
    """(consumers holding tight hosts, tight hosts over capacity) as Placement's tables say."""
    conn = await asyncpg.connect(pdsn)
    try:
        rows = await conn.fetch(
            "SELECT rp.uuid, a.consumer_id, a.used FROM allocations a "
            "JOIN resource_providers rp ON rp.id = a.resource_provider_id "
            "JOIN resource_classes rc ON rc.id = a.resource_class_id "
            "WHERE rc.name = 'DISK_GB' AND rp.uuid = ANY($1::text[])",
            [h.uuid for h in tight],
        )
    finally:
        await conn.close()
    used: dict[str, int] = {}
    for r in rows:
        used[r[0]] = used.get(r[0], 0) + int(r[2])
    return [r[1] for r in rows], sum(1 for u in used.values() if u > TIGHT_DISK_GB)


async def empty_tight(server: PlacementServer, consumers: list[str]) -> None:
    async with server.seeder() as s:
        for c in consumers:
            status, _ = await s.call("DELETE", f"/allocations/{c}")
            assert status in (204, 404), status


def meter(placement: Pids, daemons: Pids | None = None) -> CpuMeter:
    """CPU of each party: Placement's workers and their PostgreSQL backends, the daemons and
    theirs (mirror, guard, host state), and this process (the oslo.messaging callers, or the
    client of Placement's floor)."""
    parties: dict[str, Pids] = {
        "placement": placement,
        "placement_pg": lambda: pg_backends_of(placement()),
        "bench_callers": me,
    }
    if daemons is not None:
        parties["daemons"] = daemons
        parties["daemons_pg"] = lambda: pg_backends_of(daemons())
    return CpuMeter(parties)


def run_tier(
    n: int,
    text: str,
    tmp: Path,
    reset: Callable[[], int],
    placement: Pids,
    args: argparse.Namespace,
) -> dict[str, Any]:
    daemons = []
    for i in range(n):
        conf = tmp / f"tier{n}-{i}.conf"
        health = tmp / f"tier{n}-{i}.health.json"
        conf.write_text(
            text.replace("\nhost = ", f"\nhost = d{i}-", 1) + f"health_file = {health}\n"
        )
        daemons.append(Serve(conf, tmp / f"tier{n}-{i}.log", health))
    boots = Boots(args.amqp, args.projects)
    out: dict[str, Any] = {"daemons": n}
    try:
        ready = []
        for i, d in enumerate(daemons):  # one after the other
            ready.append(d.start(args.ready_timeout))
            progress(f"{n} daemon(s): daemon {i + 1} READY in {ready[-1]:.1f} s")
        out["ready_s"] = max(ready)
        out["pg_connections"] = pg_in_use()[0]
        for _ in range(3 * n):
            boots.try_boot(args.flavor)  # warm: connections, first queries, each daemon
        cpu = meter(placement, lambda: [d.proc.pid for d in daemons if d.proc is not None])
        cpu.start()
        out["throughput"] = concurrently(boots, args.boots, args.callers, args.flavor)
        progress(f"{n} daemon(s): {args.boots} boots, {out['throughput']['boots_s']:.1f}/s")
        out["cpu_ms_per_boot"] = {k: v * 1000 / args.boots for k, v in cpu.stop().items()}
        out["tight_taken_by_throughput"] = reset()  # the tight hosts start empty
        time.sleep(2.5)  # a host-state refresh writes the health files; the mirrors see it
        before = guard_stats(daemons)
        out["tight"] = concurrently(boots, args.tight, args.callers, TIGHT_FLAVOR)
        time.sleep(2.5)
        out["tight_guard"] = minus(guard_stats(daemons), before)
        out["throughput_guard"] = before
    finally:
        boots.close()
        for d in daemons:
            d.stop()
    return out


async def main_in(args: argparse.Namespace) -> None:
    db = NovaDB(prefix="asyncsched_btier")
    server = PlacementServer(workers=args.workers)
    tmp = Path(tempfile.mkdtemp(prefix="bench-tier-"))
    used, most = pg_in_use()
    # each daemon: db_pool_size for the API database and its cell, its mirror, the guard's
    # two one-connection pools; Placement's workers; this bench's pools and checks
    need = max(args.daemons, default=0) * (2 * args.db_pool_size + 3) + args.workers + 6
    progress(f"PostgreSQL serves {used} of {most} connections; this run opens at most {need}")
    if used + need > most:
        raise SystemExit(f"not enough PostgreSQL connections free: {most - used} < {need}")
    try:
        await asyncio.to_thread(server.start)
        pdsn = f"postgresql://root@127.0.0.1/{server.db_name}"
        hosts = plan(args.providers)
        tight = tight_hosts(args.tight)
        await prepare_cloud(server, db, hosts + tight, pdsn)
        _, with_mirror = daemon_texts(server, db, args.amqp, pdsn)
        text = (
            with_mirror
            + f"db_pool_size = {args.db_pool_size}\n"
            + "".join(f"{o.replace('=', ' = ', 1)}\n" for o in args.option)
        )
        loop = asyncio.get_running_loop()
        gunicorn = getattr(server, "_proc", None)
        assert gunicorn is not None

        def placement() -> list[int]:
            return tree(gunicorn.pid)

        def reset() -> int:
            held, _ = asyncio.run_coroutine_threadsafe(tight_state(pdsn, tight), loop).result()
            asyncio.run_coroutine_threadsafe(empty_tight(server, sorted(set(held))), loop).result()
            return len(set(held))

        beat = asyncio.create_task(heartbeat(db))
        rows = []
        try:
            for n in args.daemons:
                row = await asyncio.to_thread(run_tier, n, text, tmp, reset, placement, args)
                held, over = await tight_state(pdsn, tight)
                refused = args.tight - row["tight"]["outcomes"].get("ok", 0)
                row["tight_held"], row["tight_over"] = len(set(held)), over
                row["lost_slots"] = min(refused, args.tight - len(set(held)))
                rows.append(row)
                print(f"  {json.dumps(row)}", flush=True)
                await empty_tight(server, sorted(set(held)))
            # Placement's floor while the cloud's computes still report (their UPDATEs load
            # the same PostgreSQL in a real cloud, whichever scheduler runs)
            cpu = meter(placement)
            cpu.start()
            put = await claim_rate(server, hosts, args.claims, args.callers, projects=args.projects)
            floor_cpu = {k: v * 1000 / args.claims for k, v in cpu.stop().items()}
            shared = await claim_rate(
                server, hosts, args.claims, args.callers, batch=32, projects=args.projects
            )
        finally:
            beat.cancel()
        floor = {"put": put, "shared": shared, "cpu_ms_per_claim": floor_cpu}
        print(f"  floor: {json.dumps(floor)}")
        report(rows, put, shared, floor_cpu, args)
    finally:
        await asyncio.to_thread(server.stop)
        await db.drop()


def report(
    rows: list[dict[str, Any]],
    put: tuple[float, float],
    shared: tuple[float, float],
    floor_cpu: dict[str, float],
    args: argparse.Namespace,
) -> None:
    print(
        f"\n== {args.providers} providers + {args.tight} one-slot hosts, Placement with "
        f"{args.workers} gunicorn workers, {args.callers} oslo.messaging callers, guard on"
    )
    print(
        f"  Placement alone at {args.callers} in flight: PUT {put[0]:.1f} claims/s "
        f"(p50 {put[1]:.0f} ms), shared POST {shared[0]:.1f}/s (p50 {shared[1]:.0f} ms)"
    )
    print(
        f"  {'daemons':>7} {'boots/s':>8} {'x PUT floor':>11} {'p50 ms':>7} {'p90 ms':>7} | "
        f"tight {args.tight}: {'placed':>6} {'refused':>7} {'raced':>5} {'backed out':>10} "
        f"{'lost slots':>10} {'over':>4} {'409s':>5} {'waits':>5} {'timeouts':>8}"
    )
    for r in rows:
        t, g = r["throughput"], r["tight_guard"]
        placed = r["tight"]["outcomes"].get("ok", 0)
        print(
            f"  {r['daemons']:>7} {t['boots_s']:>8.1f} {t['boots_s'] / put[0]:>11.2f} "
            f"{t['p50_ms']:>7.0f} {t['p90_ms']:>7.0f} | {'':>9}{placed:>6} "
            f"{args.tight - placed:>7} {g['raced']:>5} {g['backed_out']:>10} "
            f"{r['lost_slots']:>10} {r['tight_over']:>4} {g['refused']:>5} "
            f"{g['refusal_waits']:>5} {g['refusal_timeouts']:>8}"
        )
    parties = ["placement", "placement_pg", "daemons", "daemons_pg", "bench_callers"]
    print(
        f"  CPU ms per boot (per claim for the floor): {'':>4}"
        + "".join(f"{p:>14}" for p in parties)
    )
    print(
        f"  {'Placement alone (PUT floor)':>46}"
        + "".join(f"{floor_cpu.get(p, 0.0):>14.2f}" for p in parties)
    )
    for r in rows:
        c = r["cpu_ms_per_boot"]
        print(
            f"  {str(r['daemons']) + ' daemon(s), 20-caller boots':>46}"
            + "".join(f"{c.get(p, 0.0):>14.2f}" for p in parties)
        )
    print(f"  load average at the end: {os.getloadavg()}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--providers", type=int, default=10000)
    ap.add_argument("--daemons", default="1,2,3")
    ap.add_argument("--workers", type=int, default=4, help="Placement's gunicorn workers")
    ap.add_argument("--boots", type=int, default=100)
    ap.add_argument("--callers", type=int, default=20)
    ap.add_argument("--projects", type=int, default=20)
    ap.add_argument("--tight", type=int, default=40, help="one-slot hosts, as many boots")
    ap.add_argument("--claims", type=int, default=300, help="claims of Placement's floor")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument(
        "--db-pool-size", type=int, default=2, help="each daemon's db_pool_size (connections)"
    )
    ap.add_argument(
        "--ready-timeout",
        type=float,
        default=600.0,
        help="seconds each daemon has to be READY (the later ones start beside the earlier)",
    )
    args = ap.parse_args(argv)
    args.daemons = [int(x) for x in args.daemons.split(",") if x]  # none: the floor alone
    args.flavor = {"vcpus": 2, "memory_mb": 4096, "root_gb": 40}
    with broker.throwaway_vhost("asyncsched-tier") as vhost:
        args.amqp = broker.amqp_url(vhost)
        asyncio.run(main_in(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
