"""What the per-request services read costs the decision path, at 10,000 hosts (issue 20).

A real PostgreSQL nova deployment of ``--hosts`` compute hosts in 2 cells (1% disabled) whose
computes heartbeat as nova's do (every host's services row updated every ``report_interval``,
10 s: 1,000 rows a second at 10,000 hosts, from another process), and an operator disabling and
enabling a host every second. The host-state cache runs as in the daemon (refresh every 10 s).

One request = the decision path on every cached host (default filters, all weighers: filter,
weigh, pick), ``without`` as before, ``with`` the fresh read first (begun before Placement's
answer and awaited after it, as ``SchedulerManager.hosts_for`` does; ``--placement-ms``
stands for that answer in both, 0 by default: nothing to overlap). The two alternate,
request by request, in the same run; wall time, p50/p99 and the p99 difference are printed.

    .venv/bin/python -m bench.bench_services [--hosts 10000] [--requests 1000] [--gap 0.005]
        [--placement-ms 0]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from asyncsched.conf.options import Config
from asyncsched.objects.models import Flavor, RequestSpec
from asyncsched.scheduling.engine import DecisionEngine
from asyncsched.scheduling.loader import load_filters, load_weighers
from asyncsched.state.cache import HostStateCache
from asyncsched.state.rows import service_info
from asyncsched.state.sql import SQL_SERVICES_ALL
from tests.support.nova_db import CellDB, NodeSpec, NovaDB

REPORT_INTERVAL = 10.0  # nova's [DEFAULT] report_interval
TICK = 0.05  # the heartbeater's step


class Heartbeats:
    """Every compute's heartbeat (as nova's servicegroup DB driver writes it) and an operator
    toggling ``disabled``, from another process (as the computes are): a thread would take
    the GIL from the event loop under test."""

    def __init__(self, cells: list[CellDB]) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._stop = ctx.Event()
        self._count = ctx.Value("q", 0)
        self._proc = ctx.Process(
            target=_beat_process, args=([c.dsn for c in cells], self._stop, self._count)
        )

    @property
    def beats(self) -> int:
        return int(self._count.value)

    def __enter__(self) -> Heartbeats:
        self._proc.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._proc.join(30)


def _beat_process(dsns: list[str], stop: Any, count: Any) -> None:
    asyncio.run(_beat(dsns, stop, count))


async def _beat(dsns: list[str], stop: Any, count: Any) -> None:
    conns = [await asyncpg.connect(d) for d in dsns]
    ids = [[r[0] for r in await c.fetch("SELECT id FROM services ORDER BY id")] for c in conns]
    per_tick = [max(1, round(len(i) * TICK / REPORT_INTERVAL)) for i in ids]
    rng = random.Random(1)
    pos = [0] * len(conns)
    last_toggle = time.monotonic()
    try:
        while not stop.is_set():
            for k, conn in enumerate(conns):
                batch = ids[k][pos[k] : pos[k] + per_tick[k]]
                pos[k] = (pos[k] + per_tick[k]) % max(1, len(ids[k]))
                await conn.execute(
                    "UPDATE services SET report_count = report_count + 1,"
                    " last_seen_up = now() AT TIME ZONE 'utc',"
                    " updated_at = now() AT TIME ZONE 'utc' WHERE id = ANY($1::int[])",
                    batch,
                )
                count.value += len(batch)
            if time.monotonic() - last_toggle >= 1.0:
                last_toggle = time.monotonic()
                k = rng.randrange(len(conns))
                await conns[k].execute(
                    "UPDATE services SET disabled = NOT disabled,"
                    " updated_at = now() AT TIME ZONE 'utc' WHERE id = $1",
                    rng.choice(ids[k]),
                )
            await asyncio.sleep(TICK)
    finally:
        for conn in conns:
            await conn.close()


def _p(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * q))]


async def _timed(fn: Callable[[], Awaitable[None]], cpu: list[float] | None = None) -> float:
    """Wall ms of one call; its CPU ms on this thread go to ``cpu``."""
    c0, t0 = time.thread_time(), time.perf_counter()
    await fn()
    wall = (time.perf_counter() - t0) * 1000.0
    if cpu is not None:
        cpu.append((time.thread_time() - c0) * 1000.0)
    return wall


async def run(n_hosts: int, requests: int, gap: float, placement: float) -> None:
    async with NovaDB(prefix="benchsvc") as db:
        per_cell = n_hosts // len(db.cells)
        for k, cell in enumerate(db.cells):
            await db.add_hosts_bulk(cell, [NodeSpec(host=f"c{k}-h{i}") for i in range(per_cell)])
            await db.cell_execute(cell, "UPDATE services SET disabled = true WHERE id % 100 = 0")
            await db.cell_execute(cell, "VACUUM ANALYZE services")
        config = db.config()
        filters, weighers = load_filters(config), load_weighers(config)
        engine = DecisionEngine(config, filters, weighers)
        spec = RequestSpec(flavor=Flavor(memory_mb=2048, vcpus=2, root_gb=20))
        async with HostStateCache(config) as cache, _Beating(db.cells) as beats:
            engine.set_aggregates(cache.aggregates())

            async def decide() -> None:
                if placement:
                    await asyncio.sleep(placement)
                req = engine.start(cache.all_hosts())
                req.filter(spec, 0)
                req.pick(spec)

            decide_in_with: list[float] = []

            async def fresh_then_decide() -> None:  # as SchedulerManager.hosts_for does
                fresh = await cache.begin_fresh_services()
                if placement:
                    await asyncio.sleep(placement)
                await fresh
                t0 = time.thread_time()
                req = engine.start(cache.all_hosts())
                req.filter(spec, 0)
                req.pick(spec)
                decide_in_with.append((time.thread_time() - t0) * 1000.0)

            out = await _measure(cache, decide, fresh_then_decide, requests, gap)
            out["decide cpu in with"] = decide_in_with[-requests:]
            nova_way = await _nova_reads(db.cells, 30)
            fresh_cpu: list[float] = []
            fresh_only = [await _timed(cache.fresh_services, fresh_cpu) for _ in range(200)]
            if os.environ.get("BENCH_PROFILE"):
                import cProfile
                import pstats

                prof = cProfile.Profile()
                prof.enable()
                for _ in range(300):
                    await cache.fresh_services()
                prof.disable()
                pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
        _report(n_hosts, config, out, (fresh_only, fresh_cpu), cache.metrics, beats.beats)
        print(f"  Placement's answer stood for by a {placement * 1000:.1f} ms wait in both")
        print(
            f"  nova's own per-request read (every nova-compute services row of both cells,"
            f" parsed), wall: p50 {statistics.median(nova_way):.3f} ms"
            f"  p99 {_p(nova_way, 0.99):.3f} ms"
        )


async def _nova_reads(cells: list[CellDB], runs: int) -> list[float]:
    """Wall ms of nova's way: ServiceList.get_by_binary('nova-compute') of every cell."""
    conns = [await asyncpg.connect(c.dsn) for c in cells]
    try:

        async def one(conn: asyncpg.Connection) -> None:
            [service_info(r) for r in await conn.fetch(SQL_SERVICES_ALL)]

        async def read() -> None:
            await asyncio.gather(*(one(c) for c in conns))

        return [await _timed(read) for _ in range(runs)]
    finally:
        for c in conns:
            await c.close()


class _Beating:
    def __init__(self, cells: list[CellDB]) -> None:
        self._beats = Heartbeats(cells)

    async def __aenter__(self) -> Heartbeats:
        self._beats.__enter__()
        await asyncio.sleep(2 * TICK)
        return self._beats

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self._beats.__exit__)


async def _measure(
    cache: HostStateCache,
    without: Callable[[], Awaitable[None]],
    with_fresh: Callable[[], Awaitable[None]],
    requests: int,
    gap: float,
) -> dict[str, list[float]]:
    for _ in range(20):  # warm both (columns built, statements prepared)
        await with_fresh()
    gc.collect()
    out: dict[str, list[float]] = {"without": [], "with": [], "without cpu": [], "with cpu": []}
    for i in range(2 * requests):
        name, fn = ("without", without) if i % 2 == 0 else ("with", with_fresh)
        out[name].append(await _timed(fn, out[f"{name} cpu"]))
        await asyncio.sleep(gap)
    return out


def _report(
    n: int,
    config: Config,
    out: dict[str, list[float]],
    fresh_only: tuple[list[float], list[float]],
    metrics: dict[str, int],
    beats: int,
) -> None:
    print(
        f"decision path at {n} cached hosts (default filters, all weighers), real PostgreSQL, "
        f"heartbeats {n / REPORT_INTERVAL:.0f} rows/s, one toggle of disabled a second"
    )
    for kind in ("", " cpu"):
        what = "wall" if not kind else "CPU of the event-loop thread"
        for name in ("without", "with"):
            s = out[name + kind]
            print(
                f"  {name:>7} fresh read, {what}: p50 {statistics.median(s):7.3f} ms  "
                f"p99 {_p(s, 0.99):7.3f} ms  ({len(s)} requests)"
            )
        a, b = out["with" + kind], out["without" + kind]
        d99 = _p(a, 0.99) - _p(b, 0.99)
        d50 = statistics.median(a) - statistics.median(b)
        print(f"  difference ({what}): p50 {d50:+.3f} ms  p99 {d99:+.3f} ms (target: p99 +1 ms)")
    s = out["decide cpu in with"]
    print(
        f"  of which the decision itself (CPU) in 'with': p50 {statistics.median(s):.3f} ms"
        f"  p99 {_p(s, 0.99):.3f} ms (the rest: the read, and other tasks run while it waits)"
    )
    for what, s in zip(("wall", "CPU of the event-loop thread"), fresh_only, strict=True):
        print(
            f"  the fresh read alone (both cells), {what}: p50 {statistics.median(s):.3f} ms  "
            f"p99 {_p(s, 0.99):.3f} ms"
        )
    m = metrics
    print(
        f"  fresh reads {m['services_fresh_reads']}, failed {m['services_fresh_failures']},"
        f" skipped {m['services_fresh_skipped']}; refresh passes {m['refresh_passes']};"
        f" heartbeats written {beats};"
        f" fresh_services_wait {config.asyncsched.fresh_services_wait} s"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hosts", type=int, default=10000)
    ap.add_argument("--requests", type=int, default=1000, help="per variant")
    ap.add_argument("--gap", type=float, default=0.005, help="seconds between requests")
    ap.add_argument(
        "--placement-ms",
        type=float,
        default=0.0,
        help="a wait standing for Placement's answer in both variants (the read overlaps it); "
        "0: nothing to overlap, the worst case",
    )
    args = ap.parse_args(argv)
    asyncio.run(run(args.hosts, args.requests, args.gap, args.placement_ms / 1000.0))


if __name__ == "__main__":
    main()
