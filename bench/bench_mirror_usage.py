"""The Placement mirror's usage refresh at 10,000 / 100,000 providers: the sums query it
had (every allocation summed per provider and class, three sorted arrays in PostgreSQL's
binary form, diffed in numpy) against the id bitmaps it has now (``sql.ALLOCATION_BITMAPS``,
then only the rows that appeared read by id, the sums of the pairs touched moved), measured
in the same run, interleaved, on one PostgreSQL table shaped as Placement's ``allocations``
(its indexes included).

Each round claims ``--claims`` new allocations and deletes as many old ones, then times one
usage refresh in each form: wall time (PostgreSQL's query time, nearly all of it) and the
refresher's CPU. Both forms must agree on the usage after every round.

    .venv/bin/python -m bench.bench_mirror_usage [--providers 10000,100000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
import uuid

import asyncpg
import numpy as np

from asyncsched.state.placement_mirror import sql
from asyncsched.state.placement_mirror.allocations import (
    Bitmaps,
    KnownRows,
    Rows,
    bitmap_diff,
    sums,
)
from asyncsched.state.placement_mirror.binary import arrays

DSN = "postgresql://root@127.0.0.1/{db}"
Sums = dict[tuple[int, int], int]

# the refresh's usage query before the id bitmaps (docs/scale.md)
_SUMS_QUERY = (
    "SELECT array_send(COALESCE(array_agg(rp ORDER BY rp, rc), '{}')), "
    "array_send(COALESCE(array_agg(rc ORDER BY rp, rc), '{}')), "
    "array_send(COALESCE(array_agg(n ORDER BY rp, rc), '{}')) "
    "FROM (SELECT resource_provider_id AS rp, resource_class_id AS rc, SUM(used)::bigint AS n "
    "FROM allocations GROUP BY resource_provider_id, resource_class_id) AS u"
)


class SumsForm:
    """The previous form: all sums each time, compared whole in numpy."""

    def __init__(self) -> None:
        self.keys = np.empty(0, np.int64)
        self.n = np.empty(0, np.int64)

    async def refresh(self, conn: asyncpg.Connection) -> int:
        rp, rc, n = arrays(tuple(await conn.fetchrow(_SUMS_QUERY)), (4, 4, 8))
        keys = (rp << 32) | rc
        if len(keys) == len(self.keys) and np.array_equal(keys, self.keys):
            touched = np.unique(rp[n != self.n])
        else:
            gone_or_new = np.setxor1d(keys, self.keys, assume_unique=True)
            touched = np.unique(gone_or_new >> 32)
        self.keys, self.n = keys, n
        return len(touched)

    def usage(self) -> Sums:
        return {
            (k >> 32, k & 0xFFFFFFFF): v
            for k, v in zip(self.keys.tolist(), self.n.tolist(), strict=True)
            if v
        }


class BitmapForm:
    """The current form: the id set, then only the rows that moved."""

    def __init__(self) -> None:
        self.bitmaps: Bitmaps | None = None
        self.known: KnownRows | None = None

    async def refresh(self, conn: asyncpg.Connection) -> int:
        if self.known is None or self.bitmaps is None:
            rows = Rows.decode(*await conn.fetchrow(sql.ALLOCATIONS_ALL))
            self.known, self.bitmaps = KnownRows.of(rows), Bitmaps.of_ids(rows.ids)
            return len(rows)
        bitmaps = Bitmaps.decode(*await conn.fetchrow(sql.ALLOCATION_BITMAPS))
        gone, came_ids = bitmap_diff(self.bitmaps, bitmaps)
        came = Rows.empty()
        if len(came_ids):
            came = Rows.decode(*await conn.fetchrow(sql.ALLOCATIONS_BY_ID, came_ids.tolist()))
        self.known, left = self.known.moved(gone, came)
        self.bitmaps = bitmaps
        delta = sums(came)
        for k, v in sums(left, -1).items():
            delta[k] = delta.get(k, 0) + v
        return len({rp for (rp, _), v in delta.items() if v})

    def usage(self) -> Sums:
        assert self.known is not None
        return {k: v for k, v in sums(self.known.all()).items() if v}


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


async def _churn(conn: asyncpg.Connection, providers: int, rng: random.Random, n: int) -> None:
    """``n`` claims of two rows, and ``n`` old consumers deleted (all their rows)."""
    rows = [
        (rng.randrange(1, providers + 1), str(uuid.uuid4()), c, 1) for _ in range(n) for c in (0, 1)
    ]
    await conn.executemany(
        "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used) "
        "VALUES ($1, $2, $3, $4)",
        rows,
    )
    top = await conn.fetchval("SELECT max(id) FROM allocations")
    victims = [rng.randrange(1, top) for _ in range(n)]
    await conn.execute(
        "DELETE FROM allocations WHERE consumer_id IN "
        "(SELECT consumer_id FROM allocations WHERE id = ANY($1::int[]))",
        victims,
    )


async def measure(providers: int, rounds: int, claims: int) -> None:
    db = f"bench_usage_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(DSN.format(db="postgres"))
    await admin.execute(f'CREATE DATABASE "{db}"')
    try:
        conn = await asyncpg.connect(DSN.format(db=db), server_settings={"jit": "off"})
        await _seed(conn, providers)
        forms: dict[str, SumsForm | BitmapForm] = {"sums": SumsForm(), "bitmaps": BitmapForm()}
        for f in forms.values():
            await f.refresh(conn)
        rng = random.Random(providers)
        wall: dict[str, list[float]] = {k: [] for k in forms}
        cpu: dict[str, list[float]] = {k: [] for k in forms}
        rows = await conn.fetchval("SELECT count(*) FROM allocations")
        for r in range(rounds):
            await _churn(conn, providers, rng, claims)
            order = list(forms) if r % 2 == 0 else list(reversed(forms))
            for name in order:
                t0, c0 = time.perf_counter(), time.process_time()
                await forms[name].refresh(conn)
                wall[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
            if forms["sums"].usage() != forms["bitmaps"].usage():
                raise SystemExit(f"round {r}: the two forms disagree")
        await conn.close()
        med = {
            k: (statistics.median(wall[k]) * 1e3, statistics.median(cpu[k]) * 1e3) for k in forms
        }
        (ow, oc), (nw, nc) = med["sums"], med["bitmaps"]
        print(
            f"providers={providers} allocation rows={rows} rounds={rounds} "
            f"claims+deletes/round={claims} | sums form: {ow:.1f} ms wall, {oc:.1f} ms CPU | "
            f"bitmap form: {nw:.1f} ms wall, {nc:.1f} ms CPU | ratio wall {ow / nw:.2f}x, "
            f"CPU {oc / nc:.2f}x",
            flush=True,
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
