"""The Placement mirror's refresh at 100,000 providers, two statement sets A/B in one run.

A real Placement (gunicorn, PostgreSQL) with ``--providers`` compute nodes and
``--per-host`` instances each COPYed into its database (read back through its API), one
``PlacementMirror`` refreshing every 0.5 s, and on the same PostgreSQL the load of the
end-to-end run: ``--heartbeats`` rows UPDATEd a second (a tenth of them every 0.1 s, as
``bench_candidates``' computes report). Then phases of ``--seconds`` each, the statement sets
alternating (A B A B ...) on the same mirror and the same database: one claim through
Placement's API (``PUT /allocations``) and one consumer deleted (``DELETE /allocations``)
every 0.1 to 0.5 s, the lag of each claim (API answer until the mirror shows it), the refresh
p50/max (the mirror's own figures, the first load apart), and the CPU the mirror's
PostgreSQL backend spent per refresh (``/proc``: what a refresh costs PostgreSQL, the figure
the machine's load disturbs least).

Forms: ``before``, the id bitmaps grouped and sorted by ``GROUP BY id >> 6 ORDER BY id >> 6``
(PostgreSQL sorts every id) and the next refresh one interval after the last one *ended*;
``after``, ``sql.ALLOCATION_BITMAPS`` as it is now (grouped by hash, only the buckets
sorted) and the next refresh one interval after the last one *began*
(``PlacementMirror._next_delay``). The mirror's view is checked against Placement's API for
a sample of providers at the end of every phase. The refresher's CPU per refresh is this
process's (the claims' client and the heartbeats' too: a few ms a phase).

With ``--burst N`` it first times one refresh after N claims land at once.

    .venv/bin/python -m bench.bench_mirror_refresh [--providers 100000] [--seconds 30]
        [--phases 4] [--burst 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import random
import statistics
import time
import uuid as uuidlib
from datetime import UTC, datetime
from typing import Any

import asyncpg
import psutil  # type: ignore[import-untyped]  # (oslo.utils brings it; no stubs)

from asyncsched.state.placement_mirror import PlacementMirror
from asyncsched.state.placement_mirror.connection import PgMirrorConnection
from asyncsched.state.placement_mirror.statements import POSTGRESQL, MirrorSQL
from bench.placement_seed import INSTANCE, plan, seed, seed_allocations, verify_readback
from tests.support.placement_server import PlacementServer, Seeder

#: the id bitmaps before: PostgreSQL sorted every id to group them (docs/scale.md)
BEFORE_BITMAPS = (
    "SELECT array_send(COALESCE(array_agg(b), '{}')), array_send(COALESCE(array_agg(m), '{}')) "
    "FROM (SELECT id >> 6 AS b, bit_or(1::int8 << (id & 63)) AS m FROM allocations "
    "GROUP BY id >> 6 ORDER BY id >> 6) AS s"
)
FORMS: dict[str, MirrorSQL] = {
    "before": dataclasses.replace(POSTGRESQL, allocation_bitmaps=BEFORE_BITMAPS),
    "after": POSTGRESQL,
}


def schedule(m: PlacementMirror, form: str) -> None:
    """``before``: the next refresh one interval after the last one ended (the loop as it
    was); ``after``: the mirror's own ``_next_delay``."""
    if form == "before":
        vars(m)["_next_delay"] = lambda failures, began: (
            m.interval if not failures else min(m.interval * 2.0**failures, 10.0)
        )
    else:
        vars(m).pop("_next_delay", None)


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def log(msg: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] load {load()}: {msg}", flush=True)


async def heartbeats(dsn: str, rows: int) -> None:
    """``rows`` rows UPDATEd a second, a tenth every 0.1 s (nova's services reporting)."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "CREATE TABLE bench_beats (id int PRIMARY KEY, updated_at timestamp, n int)"
        )
        await conn.execute(
            "INSERT INTO bench_beats SELECT i, now(), 0 FROM generate_series(1, $1) i", rows
        )
        tick = 0
        while True:
            await conn.execute(
                "UPDATE bench_beats SET updated_at = now(), n = n + 1 WHERE id % 10 = $1",
                tick % 10,
            )
            tick += 1
            await asyncio.sleep(0.1)
    finally:
        await conn.close()


def vcpu_used(m: PlacementMirror, rp_uuid: str) -> int:
    st = m.state
    assert st is not None
    return st.providers[st.by_uuid[rp_uuid]].used.get("VCPU", 0)


async def claims(
    s: Seeder, m: PlacementMirror, hosts: list[Any], owned: list[tuple[str, str]], until: float
) -> list[float]:
    """A claim and a delete every 0.1 to 0.5 s until ``until``; the lag of each claim (s)."""
    rng = random.Random(len(owned))
    lags: list[float] = []
    while time.monotonic() < until:
        rp = hosts[rng.randrange(len(hosts))]
        consumer = str(uuidlib.uuid4())
        body = {
            "allocations": {rp.uuid: {"resources": {"VCPU": 1}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
        }
        victim = owned.pop(rng.randrange(len(owned)))
        status, _ = await s.call("DELETE", f"/allocations/{victim[0]}")
        assert status == 204, status
        had = vcpu_used(m, rp.uuid)
        status, _ = await s.call("PUT", f"/allocations/{consumer}", body)
        assert status == 204, status
        done = time.perf_counter()
        while vcpu_used(m, rp.uuid) <= had:  # noqa: ASYNC110  (polls as growth_one does)
            await asyncio.sleep(0.005)
        lags.append(time.perf_counter() - done)
        owned.append((consumer, rp.uuid))
        await asyncio.sleep(rng.uniform(0.1, 0.5))
    return lags


async def check_view(s: Seeder, m: PlacementMirror, sample: list[str]) -> None:
    """The mirror's usage of ``sample`` equals Placement's API once a refresh began after."""
    await m.refresh()
    for rp_uuid in sample:
        _, got = await s.call("GET", f"/resource_providers/{rp_uuid}/usages")
        st = m.state
        assert st is not None
        mine = st.providers[st.by_uuid[rp_uuid]].used
        theirs = {k: v for k, v in got["usages"].items() if v}
        if dict(mine) != theirs:
            raise SystemExit(f"the mirror's view of {rp_uuid} differs: {mine} vs {theirs}")


async def burst(s: Seeder, dsn: str, hosts: list[Any], n: int) -> None:
    """``n`` claims land at once (POSTs of 25 consumers, as the daemon shares a multi-create's
    claims) on a mirror that refreshes only when asked, then one refresh timed: wall, this
    process's CPU, what it re-read."""
    m = PlacementMirror(dsn, interval=3600, max_age=1e9, query_timeout=300)
    await m.start()
    try:
        await _burst(s, m, hosts, n)
    finally:
        await m.close()


async def _burst(s: Seeder, m: PlacementMirror, hosts: list[Any], n: int) -> None:
    for label in ("idle", "idle"):
        t0, c0 = time.perf_counter(), time.process_time()
        await m.refresh()
        log(
            f"{label} refresh: {(time.perf_counter() - t0) * 1000:.0f} ms wall, "
            f"{(time.process_time() - c0) * 1000:.0f} ms CPU"
        )
    rng = random.Random(n)
    for start in range(0, n, 25):
        body = {
            str(uuidlib.uuid4()): {
                "allocations": {
                    hosts[rng.randrange(len(hosts))].uuid: {
                        "resources": {"VCPU": 1, "MEMORY_MB": 512}
                    }
                },
                "project_id": "p",
                "user_id": "u",
                "consumer_generation": None,
            }
            for _ in range(min(25, n - start))
        }
        status, _ = await s.call("POST", "/allocations", body)
        assert status == 204, status
    for label in (f"after {n} claims", "the next"):
        t0, c0 = time.perf_counter(), time.process_time()
        await m.refresh()
        h = m.health()
        log(
            f"{label} refresh: {(time.perf_counter() - t0) * 1000:.0f} ms wall, "
            f"{(time.process_time() - c0) * 1000:.0f} ms CPU, "
            f"{h['last_changed_providers']} providers re-read, "
            f"{h['last_allocation_rows_moved']} rows moved"
        )


def backend_cpu(m: PlacementMirror) -> float:
    conn = m._conn
    assert isinstance(conn, PgMirrorConnection)
    pid = conn._conn.get_server_pid()
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


async def run(args: argparse.Namespace) -> None:
    server = PlacementServer(workers=2)
    await asyncio.to_thread(server.start)
    beat: asyncio.Task[None] | None = None
    try:
        dsn = f"postgresql://root@127.0.0.1/{server.db_name}"
        hosts = plan(args.providers, prefix=f"r{args.providers}")
        owned = [(str(uuidlib.uuid4()), h.uuid) for h in hosts for _ in range(args.per_host)]
        async with server.seeder() as s:
            await s.call("GET", "/traits")
            await seed(dsn, hosts)
            await verify_readback(s, hosts, 50)
            rows = await seed_allocations(dsn, owned) if owned else 0
        log(f"seeded {args.providers} providers, {rows} allocation rows ({INSTANCE})")
        if args.heartbeats:
            beat = asyncio.create_task(heartbeats(dsn, args.heartbeats))
        if args.burst:  # before the phases' mirror starts: one mirror in the process
            async with server.seeder() as s:
                await burst(s, dsn, hosts, args.burst)
        m = PlacementMirror(dsn, interval=0.5, max_age=1e9, query_timeout=300)
        await m.start()
        log(f"mirror loaded in {m.health()['load_ms']} ms")
        sample = [h.uuid for h in random.Random(3).sample(hosts, 30)]
        results: dict[str, list[dict[str, float]]] = {k: [] for k in FORMS}
        names = list(FORMS)
        async with server.seeder() as s:
            for phase in range(args.phases):
                name = names[phase % 2]
                await m.refresh()
                assert isinstance(m._conn, PgMirrorConnection)
                m._conn.sql = FORMS[name]
                schedule(m, name)
                await m.refresh()
                m._stats.timings.clear()
                m._stats.max_ms = 0.0
                n0, c0, p0 = m._stats.refreshes, backend_cpu(m), time.process_time()
                lags = await claims(s, m, hosts, owned, time.monotonic() + args.seconds)
                h = m.health()
                n = m._stats.refreshes - n0
                cpu = (backend_cpu(m) - c0) / n * 1000
                own = (time.process_time() - p0) / n * 1000
                await check_view(s, m, sample + [c[1] for c in owned[-5:]])
                row = {
                    "refreshes": n,
                    "pg_cpu_ms": cpu,
                    "own_cpu_ms": own,
                    "p50_ms": h["refresh_ms_p50"] or 0.0,
                    "max_ms": h["refresh_ms_max"],
                    "lag_p50_ms": statistics.median(lags) * 1000,
                    "lag_max_ms": max(lags) * 1000,
                }
                results[name].append(row)
                log(
                    f"phase {phase} {name}: {n} refreshes, PostgreSQL {cpu:.1f} ms CPU each, "
                    f"refresher {own:.1f} ms, "
                    f"refresh p50 {row['p50_ms']:.0f} ms max {row['max_ms']:.0f} ms, "
                    f"{len(lags)} claims lag p50 {row['lag_p50_ms']:.0f} ms "
                    f"max {row['lag_max_ms']:.0f} ms; view equal to the API's"
                )
        await m.close()
        if not args.phases:
            return
        print("\n== per form, over its phases (median of phase figures; max of maxima)")
        # a change just missed by a refresh waits for it to end, the delay, and the next one
        bound = {"before": "(0.5 s + 2 x max)", "after": "(0.5 s + max)"}
        refreshes = {"before": 2, "after": 1}
        for name, rs in results.items():
            print(
                f"  {name:6}: PostgreSQL CPU/refresh "
                f"{statistics.median(r['pg_cpu_ms'] for r in rs):.1f} ms, refresher "
                f"{statistics.median(r['own_cpu_ms'] for r in rs):.1f} ms, refresh p50 "
                f"{statistics.median(r['p50_ms'] for r in rs):.0f} ms, max "
                f"{max(r['max_ms'] for r in rs):.0f} ms, lag p50 "
                f"{statistics.median(r['lag_p50_ms'] for r in rs):.0f} ms, max "
                f"{max(r['lag_max_ms'] for r in rs):.0f} ms, lag bound {bound[name]} "
                f"{500 + refreshes[name] * max(r['max_ms'] for r in rs):.0f} ms"
            )
    finally:
        if beat is not None:
            beat.cancel()
        await asyncio.to_thread(server.stop)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--providers", type=int, default=100000)
    ap.add_argument("--per-host", type=int, default=2, help="instances seeded per provider")
    ap.add_argument("--heartbeats", type=int, default=10000, help="rows UPDATEd a second")
    ap.add_argument("--seconds", type=float, default=30.0, help="per phase")
    ap.add_argument("--phases", type=int, default=4, help="A B A B ...")
    ap.add_argument("--burst", type=int, default=0, help="first: one refresh after N claims")
    asyncio.run(run(ap.parse_args(argv)))


if __name__ == "__main__":
    main()
