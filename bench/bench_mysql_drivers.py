"""asyncmy against aiomysql: nova's compute_nodes + services read at 10,000 hosts (MariaDB).

Both drivers read the same two cell databases (nova-manage's schema, 5,000 hosts each) through
the host-state cache's own readers (``state/readers.read_cell``) and ``MysqlPool``, once for a
full load and once for an incremental refresh after a heartbeat round (every services row) and
1% of the nodes changed; each figure is the median of several runs, with the worst event-loop
stall seen meanwhile. aiomysql is not a dependency: install it beside to compare
(``pip install --target /tmp/aiomysql aiomysql`` and ``PYTHONPATH=$PWD:/tmp/aiomysql``).

Run: ``.venv/bin/python -m bench.bench_mysql_drivers`` (env BENCH_HOSTS overrides 10000).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import statistics
import time
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import asyncmy

from asyncsched.state.db import NovaDatabase, Pool
from asyncsched.state.db_mysql import MysqlPool
from asyncsched.state.index import CellIndex
from asyncsched.state.readers import read_cell
from bench.bench_hoststate import loop_lag_during, seed, touch
from tests.support.nova_db_mysql import MysqlNovaDB


class _Db(NovaDatabase):
    """The cache's database with the driver chosen by the benchmark."""

    driver: ModuleType = asyncmy

    async def _get_pool(self) -> Pool:
        if self._pool is None:
            self._pool = await MysqlPool.open(
                self.parsed, size=4, query_timeout=120, driver=self.driver
            )
        return self._pool


def _db(url: str, driver: ModuleType) -> _Db:
    db = _Db("bench", url, pool_size=4, query_timeout=120, reconnect_max=1, clock=time.monotonic)
    db.driver = driver
    return db


async def _pass(dbs: list[_Db], incremental: bool) -> tuple[float, float]:
    async def both() -> None:
        reads = []
        for db in dbs:
            since = None
            if incremental:
                since = (await db.fetch(db.sql.now))[0]["now"] - timedelta(seconds=15)
            reads.append(read_cell(db, CellIndex(), "c", since))
        await asyncio.gather(*reads)

    return await loop_lag_during(both())


async def measure(nova: MysqlNovaDB, driver: ModuleType, runs: int) -> dict[str, Any]:
    dbs = [_db(nova.url_of(c.dbname), driver) for c in nova.cells]
    try:
        load = [await _pass(dbs, False) for _ in range(runs)]
        incr = []
        for _ in range(runs):
            await touch(nova)
            incr.append(await _pass(dbs, True))
    finally:
        for db in dbs:
            await db.close()
    return {
        "load": statistics.median(t for t, _ in load),
        "load_stall": max(s for _, s in load),
        "incr": statistics.median(t for t, _ in incr),
        "incr_stall": max(s for _, s in incr),
    }


async def run() -> None:
    n_hosts = int(os.environ.get("BENCH_HOSTS", "10000"))
    drivers: dict[str, ModuleType] = {"asyncmy": asyncmy}
    try:
        drivers["aiomysql"] = importlib.import_module("aiomysql")
    except ImportError:
        print("aiomysql is not installed: only asyncmy is measured")
    nova = MysqlNovaDB(Path("/tmp/asyncsched-bench-nova-manage"), prefix="bench")
    await nova.create(n_cells=2)
    try:
        await seed(nova, n_hosts)
        results = {name: await measure(nova, mod, 5) for name, mod in drivers.items()}
    finally:
        await nova.drop()
    print(f"hosts: {n_hosts} (2 cells, MariaDB, nova-manage schema); median of 5 passes")
    for name, r in results.items():
        print(
            f"{name:9s} full load {r['load'] * 1000:7.0f} ms"
            f" (stall {r['load_stall'] * 1000:.1f} ms)"
            f"   refresh after heartbeats + 1% nodes {r['incr'] * 1000:6.0f} ms"
            f" (stall {r['incr_stall'] * 1000:.1f} ms)"
        )
    if len(results) == 2:
        a, b = results["asyncmy"], results["aiomysql"]
        print(
            f"aiomysql / asyncmy: full load {b['load'] / a['load']:.2f}x,"
            f" refresh {b['incr'] / a['incr']:.2f}x"
        )


def main(argv: list[str] | None = None) -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
