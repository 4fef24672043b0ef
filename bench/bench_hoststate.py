"""Host-state cache at 10,000 compute nodes in 2 cells (real PostgreSQL, or MariaDB).

Measures: cold full load (start), an incremental refresh with nothing changed, one after a
heartbeat round (every service row) plus 1% of the nodes changed, a full resync, the event
loop's worst stall while a full resync runs, and RSS. The baseline, measured in the same run,
is nova's per-request way: for each request, read every nova-compute service of every cell and
the candidate compute nodes (``uuid IN (<= 1000 uuids)``) and parse them; ratios compare that
with what a request costs here (O(1) lookups in memory).

Run: ``.venv/bin/python -m bench.bench_hoststate`` (or ``python -m bench`` for all);
``--db mysql`` runs it on MariaDB (nova-manage's schema, asyncmy; ``docs/mysql.md``);
env BENCH_HOSTS overrides 10000, BENCH_GC_FREEZE=1 calls gc.freeze() after the load.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg

from asyncsched.state.cache import HostStateCache
from asyncsched.state.rows import node_snapshot, service_info
from asyncsched.state.sql import MYSQL, POSTGRES
from tests.support.nova_db import NodeSpec, NovaDB, stats_json, utcnow
from tests.support.nova_db_mysql import MysqlConn, MysqlNovaDB, is_mysql
from tests.support.nova_db_mysql import connect as mysql_connect

CANDIDATES = 1000  # [scheduler] max_placement_results


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def nova_per_request(db: NovaDB, uuids: Sequence[str]) -> float:
    """One request's host-state load the way upstream does it; returns seconds."""
    q = MYSQL if is_mysql(db) else POSTGRES
    nodes = "SELECT * FROM compute_nodes WHERE deleted = 0 AND uuid = ANY($1::varchar[])"
    t0 = time.perf_counter()
    for cell in db.cells:
        if is_mysql(db):
            raw = await mysql_connect(cell.dbname)
            conn: Any = MysqlConn(raw)
            nodes = "SELECT * FROM compute_nodes WHERE deleted = 0 AND uuid IN $1"
        else:
            conn = await asyncpg.connect(cell.dsn)
        try:
            services = {r["host"]: service_info(r) for r in await conn.fetch(q.services_all)}
            rows = await conn.fetch(nodes, list(uuids))
            states = [node_snapshot(r, cell.uuid) for r in rows if r["host"] in services]
            assert len(states) <= len(uuids)
        finally:
            await (raw.ensure_closed() if is_mysql(db) else conn.close())
    return time.perf_counter() - t0


async def seed(db: NovaDB, n_hosts: int, *, heartbeat: bool = False) -> list[str]:
    """``n_hosts`` hosts in 2 cells, 2 instances each, 20 aggregates, stamped an hour ago."""
    t0 = time.perf_counter()
    per_cell = n_hosts // 2
    uuids: list[str] = []
    for ci, cell in enumerate(db.cells):
        specs = [
            NodeSpec(
                host=f"cn{ci}-{i:05d}",
                stats=stats_json(num_instances=i % 9, io_workload=i % 3),
                memory_mb_used=512 + (i % 50) * 1024,
            )
            for i in range(per_cell)
        ]
        uuids += await db.add_hosts_bulk(cell, specs)
        await db.add_instances_bulk(cell, [(s.host, s.host) for s in specs for _ in range(2)])
    for k in range(20):
        hosts = [f"cn{k % 2}-{i:05d}" for i in range(k * 50, k * 50 + 50)]
        await db.add_aggregate(f"agg{k}", hosts, {"availability_zone": f"az{k % 3}"})
    hour_ago = utcnow() - timedelta(hours=1)
    for cell in db.cells:  # seeded an hour ago: outside the refresh watermark overlap
        for table in ("compute_nodes", "services", "instances"):
            await db.cell_execute(
                cell, f"UPDATE {table} SET created_at = $1, updated_at = $1", hour_ago
            )
    print(
        f"seeded {len(uuids)} nodes, {2 * len(uuids)} instances in 2 cells "
        f"({time.perf_counter() - t0:.1f}s)"
    )
    return uuids


async def touch(db: NovaDB) -> None:
    """A heartbeat round (every service row) and 1% of the nodes reporting new usage."""
    now = utcnow()
    for cell in db.cells:
        await db.cell_execute(cell, "UPDATE services SET last_seen_up = $1, updated_at = $1", now)
        await db.cell_execute(
            cell,
            "UPDATE compute_nodes SET free_ram_mb = free_ram_mb - 1, updated_at = $1"
            " WHERE id % 100 = 0",
            now,
        )


async def loop_lag_during(coro: Any) -> tuple[float, float]:
    """(seconds the coroutine took, worst gap between 1 ms ticks of another task)."""
    worst = 0.0
    done = False

    async def ticker() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            worst = max(worst, now - last - 0.001)
            last = now

    t = asyncio.create_task(ticker())
    t0 = time.perf_counter()
    await coro
    took = time.perf_counter() - t0
    done = True
    await t
    return took, worst


async def run(dialect: str = "postgresql") -> None:
    if os.environ.get("BENCH_GC_FREEZE"):
        print("gc.freeze() after the initial load")
    n_hosts = int(os.environ.get("BENCH_HOSTS", "10000"))
    if dialect == "mysql":
        db: NovaDB = MysqlNovaDB(Path("/tmp/asyncsched-bench-nova-manage"), prefix="bench")
    else:
        db = NovaDB(prefix="bench")
    await db.create(n_cells=2)
    print(f"database: {dialect}")
    try:
        uuids = await seed(db, n_hosts)

        rss0 = rss_mb()
        cache = HostStateCache(db.config(refresh_interval=3600))
        t_load, lag_load = await loop_lag_during(cache.start())
        rss1 = rss_mb()
        if os.environ.get("BENCH_GC_FREEZE"):
            gc.collect()
            gc.freeze()
        assert len(cache.all_hosts()) == len(uuids), cache.health()

        t_noop, _ = await loop_lag_during(cache.refresh())

        await touch(db)
        t_incr, lag_incr = await loop_lag_during(cache.refresh())
        t_full, lag_full = await loop_lag_during(cache.refresh(full=True))

        # per-request cost: ours (lookups) vs nova's (DB reload of the candidates)
        rng = random.Random(1)
        cands = rng.sample(uuids, min(CANDIDATES, len(uuids)))
        reps = 200
        t0 = time.perf_counter()
        for _ in range(reps):
            got = cache.get_by_uuids(cands)
        t_lookup = (time.perf_counter() - t0) / reps
        assert len(got) == len(cands)
        base = [await nova_per_request(db, cands) for _ in range(5)]
        t_base = sorted(base)[len(base) // 2]
        base_all = [await nova_per_request(db, uuids) for _ in range(3)]
        t_base_all = sorted(base_all)[1]
        await cache.close()

        print(f"hosts: {len(uuids)}  (2 cells, 2 instances/host, 20 aggregates)")
        print(
            f"full load (start, both cells in parallel): {t_load:.3f}s"
            f"  worst loop stall {lag_load * 1000:.1f} ms"
        )
        print(f"incremental refresh, nothing changed:      {t_noop * 1000:.1f} ms")
        print(
            f"incremental refresh, heartbeats + 1% nodes: {t_incr * 1000:.1f} ms"
            f"  worst loop stall {lag_incr * 1000:.1f} ms"
        )
        print(
            f"full resync:                               {t_full:.3f}s"
            f"  worst loop stall {lag_full * 1000:.1f} ms"
        )
        print(
            f"RSS: {rss0:.0f} MB before load, {rss1:.0f} MB after "
            f"(+{rss1 - rss0:.0f} MB, {(rss1 - rss0) * 1024 / len(uuids):.1f} KB/host)"
        )
        print(
            f"per request, {len(cands)} candidates: cache lookup {t_lookup * 1e6:.0f} us vs "
            f"nova-style DB reload {t_base * 1000:.1f} ms -> {t_base / t_lookup:.0f}x"
        )
        print(
            f"nova-style reload of all {len(uuids)} nodes (rebuild path): "
            f"{t_base_all * 1000:.0f} ms; our incremental refresh is "
            f"{t_base_all / t_incr:.1f}x cheaper and runs off the request path"
        )
    finally:
        await db.drop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--db", choices=("postgresql", "mysql"), default="postgresql")
    asyncio.run(run(parser.parse_args(argv).db))


if __name__ == "__main__":
    main()
