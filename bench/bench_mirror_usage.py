"""The Placement mirror's usage refresh at 10,000 / 100,000 providers: the array form it had
(three int arrays decoded into Python ints, a Python step per sum) against the binary form
(the same arrays through ``array_send``, read and diffed in numpy), measured in the same
run, interleaved, on one PostgreSQL table shaped as Placement's ``allocations``
(its ``allocations_resource_provider_class_used_idx`` included).

Each round claims ``--claims`` new allocations, then times one usage read + diff + usage of
the touched providers in each form: wall time of the query and the refresher's CPU.

    .venv/bin/python -m bench.bench_mirror_usage [--providers 10000,100000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable

import asyncpg

from asyncsched.state.placement_mirror import reader
from asyncsched.state.placement_mirror.reader import Names, UsageArrays

DSN = "postgresql://root@127.0.0.1/{db}"
CLASSES = {0: "VCPU", 1: "MEMORY_MB", 2: "DISK_GB"}

_OLD_QUERY = (
    "SELECT COALESCE(array_agg(rp ORDER BY rp, rc), '{}'), "
    "COALESCE(array_agg(rc ORDER BY rp, rc), '{}'), COALESCE(array_agg(n ORDER BY rp, rc), '{}') "
    "FROM (SELECT resource_provider_id AS rp, resource_class_id AS rc, SUM(used)::bigint AS n "
    "FROM allocations GROUP BY resource_provider_id, resource_class_id) AS u"
)
OldArrays = tuple[list[int], list[int], list[int]]


def _old_touched(old: OldArrays, new: OldArrays) -> set[int]:
    """The diff as it was (reader.py before the binary form), for the A/B only."""
    if old == new:
        return set()
    if old[0] == new[0] and old[1] == new[1]:
        return {rp for rp, a, b in zip(new[0], old[2], new[2], strict=True) if a != b}
    return {t[0] for t in set(zip(*old, strict=True)) ^ set(zip(*new, strict=True))}


def _old_used(usage: OldArrays, names: Names, only: set[int]) -> dict[int, dict[str, int]]:
    used: dict[int, dict[str, int]] = {}
    for rp, rc, n in zip(*usage, strict=True):
        if n and rp in only:
            used.setdefault(rp, {})[names.classes[rc]] = int(n)
    return used


async def _seed(conn: asyncpg.Connection, providers: int) -> None:
    await conn.execute(
        "CREATE TABLE allocations (id serial PRIMARY KEY, resource_provider_id int NOT NULL, "
        "consumer_id varchar(36) NOT NULL, resource_class_id int NOT NULL, used int NOT NULL)"
    )
    # two instances on most hosts, three classes each: ~2.85 sums per provider as in #24
    await conn.execute(
        "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used) "
        "SELECT p, md5(p::text || ':' || k::text), c, 1 + (p + c) % 7 "
        "FROM generate_series(1, $1) p, generate_series(1, 2) k, generate_series(0, 2) c "
        "WHERE c < 2 OR p % 20 <> 0",
        providers,
    )
    await conn.execute(
        "CREATE INDEX allocations_resource_provider_class_used_idx "
        "ON allocations (resource_provider_id, resource_class_id, used)"
    )
    await conn.execute("VACUUM ANALYZE allocations")


async def _claim(conn: asyncpg.Connection, providers: int, rng: random.Random, n: int) -> None:
    rows = [
        (rng.randrange(1, providers + 1), str(uuid.uuid4()), c, 1) for _ in range(n) for c in (0, 1)
    ]
    await conn.executemany(
        "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used) "
        "VALUES ($1, $2, $3, $4)",
        rows,
    )


async def measure(providers: int, rounds: int, claims: int) -> None:
    db = f"bench_usage_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(DSN.format(db="postgres"))
    await admin.execute(f'CREATE DATABASE "{db}"')
    try:
        conn = await asyncpg.connect(DSN.format(db=db))
        await _seed(conn, providers)
        names = Names(CLASSES, {})
        old_prev: OldArrays = tuple(map(list, await conn.fetchrow(_OLD_QUERY)))  # type: ignore[assignment]
        new_prev = UsageArrays.decode(*await conn.fetchrow(reader._USAGE_PRINTS))
        rng = random.Random(providers)

        async def old_form() -> int:
            nonlocal old_prev
            row = await conn.fetchrow(_OLD_QUERY)
            got: OldArrays = (list(row[0]), list(row[1]), list(row[2]))
            touched = _old_touched(old_prev, got)
            _old_used(got, names, touched)
            old_prev = got
            return len(got[0])

        async def new_form() -> int:
            nonlocal new_prev
            got = UsageArrays.decode(*await conn.fetchrow(reader._USAGE_PRINTS))
            touched = reader._usage_touched(new_prev, got)
            reader._used_of(got, names, touched)
            new_prev = got
            return len(got.rp)

        forms: dict[str, Callable[[], Awaitable[int]]] = {"array": old_form, "binary": new_form}
        wall: dict[str, list[float]] = {k: [] for k in forms}
        cpu: dict[str, list[float]] = {k: [] for k in forms}
        sums = 0
        for r in range(rounds):
            await _claim(conn, providers, rng, claims)
            order = list(forms) if r % 2 == 0 else list(reversed(forms))
            for name in order:
                t0, c0 = time.perf_counter(), time.process_time()
                sums = await forms[name]()
                wall[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
        await conn.close()
        med = {
            k: (statistics.median(wall[k]) * 1e3, statistics.median(cpu[k]) * 1e3) for k in forms
        }
        (ow, oc), (nw, nc) = med["array"], med["binary"]
        print(
            f"providers={providers} sums={sums} rounds={rounds} claims/round={claims} | "
            f"array form: {ow:.1f} ms wall, {oc:.1f} ms CPU | binary form: {nw:.1f} ms wall, "
            f"{nc:.1f} ms CPU | ratio wall {ow / nw:.2f}x, CPU {oc / nc:.2f}x"
        )
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await admin.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--providers", default="10000,100000")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--claims", type=int, default=20)
    args = ap.parse_args(argv)
    for n in (int(x) for x in args.providers.split(",")):
        asyncio.run(measure(n, args.rounds, args.claims))


if __name__ == "__main__":
    main()
