"""The Placement mirror on PostgreSQL and on MariaDB (issue #25), in one run: its full load
and its refresh at 10,000 compute-node providers, read by the real ``PlacementMirror`` from
the real Placement's schema (``placement-manage db sync`` through ``PlacementServer``).

Each database gets the same cloud, written straight into Placement's tables (the API seeds
about 100 providers/s): ``--providers`` roots with VCPU/MEMORY_MB/DISK_GB inventories and two
instances' allocations each. Then, per round: an idle refresh (nothing moved), and a refresh
after ``--claims`` new allocations and as many deleted, each provider touched getting a new
generation, as Placement writes them. Rounds alternate between the two databases, so load on
the machine hits both alike; the last line gives MariaDB's medians over PostgreSQL's.

    .venv/bin/python -m bench.bench_mirror_db [--providers 10000] [--rounds 9] [--claims 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
import uuid as uuidlib
from collections.abc import Sequence
from contextlib import closing
from typing import Any

from asyncsched.state.placement_mirror import PlacementMirror
from tests.support import mysql
from tests.support.nova_db import Backend
from tests.support.placement_server import PG_HOST, PG_USER, PlacementServer

INSTANCES = 2  # per provider
CLASSES = {"VCPU": (64, 2), "MEMORY_MB": (262144, 4096), "DISK_GB": (2000, 40)}


def _connect(server: PlacementServer) -> Any:
    if server.db_backend == "mysql":
        import pymysql

        return pymysql.connect(
            host=mysql.MYSQL_HOST, user=mysql.MYSQL_USER, database=server.db_name, autocommit=True
        )
    import psycopg2

    conn = psycopg2.connect(host=PG_HOST, user=PG_USER, dbname=server.db_name)
    conn.autocommit = True
    return conn


def _many(cur: Any, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
    for i in range(0, len(rows), 2000):
        chunk = rows[i : i + 2000]
        marks = ", ".join(["(" + ", ".join(["%s"] * len(chunk[0])) + ")"] * len(chunk))
        cur.execute(sql + " VALUES " + marks, [v for r in chunk for v in r])


def seed(server: PlacementServer, providers: int) -> None:
    """``providers`` roots, their inventories and INSTANCES allocations each, in SQL."""
    with closing(_connect(server)) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, name FROM resource_classes")
        rc = {name: i for i, name in cur.fetchall() if name in CLASSES}
        if len(rc) < len(CLASSES):  # standard classes not synced to the table: os-rc's ids
            rc = {"VCPU": 0, "MEMORY_MB": 1, "DISK_GB": 2}
        cur.execute("INSERT INTO projects (id, external_id) VALUES (1, 'p')")
        cur.execute("INSERT INTO users (id, external_id) VALUES (1, 'u')")
        _many(
            cur,
            "INSERT INTO resource_providers (id, uuid, name, generation, root_provider_id)",
            [(i, str(uuidlib.uuid4()), f"cn-{i:06d}", 1, i) for i in range(1, providers + 1)],
        )
        _many(
            cur,
            "INSERT INTO inventories (resource_provider_id, resource_class_id, total, reserved,"
            " min_unit, max_unit, step_size, allocation_ratio)",
            [
                (i, rc[name], total, 0, 1, total, 1, 1.0)
                for i in range(1, providers + 1)
                for name, (total, _) in CLASSES.items()
            ],
        )
        consumers = [(str(uuidlib.uuid4()), i) for i in range(1, providers + 1) for _ in "ab"]
        _many(
            cur,
            "INSERT INTO consumers (uuid, project_id, user_id, generation)",
            [(c, 1, 1, 1) for c, _ in consumers],
        )
        _many(
            cur,
            "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used)",
            [(rp, c, rc[name], used) for c, rp in consumers for name, (_, used) in CLASSES.items()],
        )


def churn(server: PlacementServer, providers: int, claims: int, rng: random.Random) -> None:
    """``claims`` new consumers' allocations, as many consumers deleted; generations moved."""
    with closing(_connect(server)) as conn, conn.cursor() as cur:
        cur.execute("SELECT MIN(id), MAX(id) FROM allocations")
        lo, hi = cur.fetchone()
        cur.execute(
            "SELECT DISTINCT consumer_id FROM allocations WHERE id >= %s ORDER BY consumer_id"
            " LIMIT %s",
            (rng.randint(lo, max(lo, hi - 1000)), claims),
        )
        gone = [r[0] for r in cur.fetchall()]
        cur.execute("SELECT resource_class_id FROM inventories WHERE resource_provider_id = 1")
        rcs = [r[0] for r in cur.fetchall()]
        rps = [rng.randint(1, providers) for _ in range(claims)]
        for c in gone:
            cur.execute("DELETE FROM allocations WHERE consumer_id = %s", (c,))
        _many(
            cur,
            "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used)",
            [(rp, str(uuidlib.uuid4()), rc, 1) for rp in rps for rc in rcs],
        )
        for rp in set(rps):
            cur.execute(
                "UPDATE resource_providers SET generation = generation + 1 WHERE id = %s", (rp,)
            )


async def _timed(mirror: PlacementMirror) -> float:
    t0 = time.perf_counter()
    await mirror.refresh()
    return (time.perf_counter() - t0) * 1000


async def run(providers: int, rounds: int, claims: int) -> dict[Backend, dict[str, float]]:
    backends: tuple[Backend, ...] = ("postgresql", "mysql")
    servers = {b: PlacementServer(db_backend=b, workers=1) for b in backends}
    mirrors: dict[Backend, PlacementMirror] = {}
    times: dict[Backend, dict[str, list[float]]] = {b: {"idle": [], "churn": []} for b in backends}
    out: dict[Backend, dict[str, float]] = {}
    rng = random.Random(7)
    try:
        for b, server in servers.items():
            await asyncio.to_thread(server.start)
            t0 = time.perf_counter()
            await asyncio.to_thread(seed, server, providers)
            print(f"  {b}: seeded {providers} providers in {time.perf_counter() - t0:.1f} s")
            mirrors[b] = PlacementMirror(
                server.db_url, interval=3600, max_age=3600, query_timeout=120
            )
            out[b] = {"load": await _timed(mirrors[b])}
            state = mirrors[b].state
            assert state is not None and len(state.providers) == providers
        for _ in range(rounds):
            for b in backends:
                times[b]["idle"].append(await _timed(mirrors[b]))
                await asyncio.to_thread(churn, servers[b], providers, claims, rng)
                times[b]["churn"].append(await _timed(mirrors[b]))
        for b in backends:
            out[b] |= {k: statistics.median(v) for k, v in times[b].items()}
    finally:
        for m in mirrors.values():
            await m.close()
        for server in servers.values():
            await asyncio.to_thread(server.stop)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--providers", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--claims", type=int, default=20)
    args = ap.parse_args(argv)
    load = os.getloadavg()
    print(
        f"mirror on both databases: {args.providers} providers, {args.rounds} rounds,"
        f" {args.claims} claims a round (load average {load[0]:.2f})"
    )
    res = asyncio.run(run(args.providers, args.rounds, args.claims))
    print(f"  {'':12} {'load ms':>9} {'idle ms':>9} {'churn ms':>9}")
    for b, r in res.items():
        print(f"  {b:12} {r['load']:9.1f} {r['idle']:9.2f} {r['churn']:9.2f}")
    pg, my = res["postgresql"], res["mysql"]
    print(
        "  MariaDB / PostgreSQL: load {:.2f}x, idle refresh {:.2f}x, refresh after churn {:.2f}x"
        " (load average now {:.2f})".format(
            my["load"] / pg["load"],
            my["idle"] / pg["idle"],
            my["churn"] / pg["churn"],
            os.getloadavg()[0],
        )
    )


if __name__ == "__main__":
    main()
