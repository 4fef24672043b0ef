"""Computes' heartbeats at 10,000 hosts: what 1,000 reports a second cost the scheduler.

A real PostgreSQL nova database (2 cells, ``bench_hoststate``'s seed), the host-state cache,
and the scheduler's columns with ComputeFilter's mask. Every second a tenth of the services
report (``UPDATE services SET last_seen_up, updated_at``, as ``bench_candidates`` does and
nova-compute every ``report_interval`` = 10 s); the cache runs an incremental pass every
``--every`` seconds (2 s: ``bench_candidates``' daemon), and ten requests a second run the
column step (``HostColumns.slots`` + ComputeFilter's mask over every host).

Modes (``--modes``), alternately in one run on one database, so all see the same load:

* **swap**: this tree (``state/beats.py``): the changed rows' stamps read as one text a row
  with the recent ones flagged by the database, a heartbeat read narrow (``services_beats``,
  its beat aware from PostgreSQL) and swapping the service without a touch, a row read again
  unchanged giving the ServiceInfo held; the passes read no beat of a host held up, a sweep
  reads every beat every min(service_down_time / 4, 15 s) = 15 s here;
* **old**: this tree with every incremental pass a sweep: every beat of the watermark's
  overlap read by every pass and the held sets recomputed each time, as before the sweep
  (``fresh.sweep_interval``);
* **before**: the same at 5e4ef54: three timestamps a row compared in Python, every
  heartbeat row read narrow made a new ServiceInfo, a coroutine a swapped host;
* **touch**: before heartbeats were read narrow or swapped: every changed row read whole,
  every heartbeat a touch, so the next request rebuilds that host's column row (the
  previous ``read_stamped`` and a ``swap_beat`` that never swaps).

Figures are CPU time of this process (``time.process_time``: the load changes them far
less than wall time): per refresh pass, per request, per second of the phase; and the
touches a second; the refresher's CPU a second (its passes' CPU over the phase's wall time).
Run:
``.venv/bin/python -m bench.bench_heartbeats [--phase 70 --rounds 2 --modes swap,before]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import statistics
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from asyncsched.common.clock import utcnow as aware_now
from asyncsched.scheduling.columns import ColumnView, HostColumns
from asyncsched.scheduling.filters.compute_filter import ComputeFilter
from asyncsched.service import DAEMON_GC_THRESHOLDS
from asyncsched.state import readers, table
from asyncsched.state.beats import keep_seconds, with_beat
from asyncsched.state.cache import HostStateCache
from asyncsched.state.db import NovaDatabase
from asyncsched.state.dialect import POSTGRES as PG_SYNTAX
from asyncsched.state.index import CellIndex
from asyncsched.state.rows import aware
from asyncsched.state.sql import CHUNK, _signature
from asyncsched.state.sweep import Sweeps
from bench.bench_hoststate import seed
from tests.support.nova_db import NovaDB, utcnow
from tests.support.sched_helpers import config


def _newest(r: Sequence[Any]) -> datetime | None:
    stamps = [s for s in (r[1], r[2], r[3]) if s is not None]
    return max(stamps) if stamps else None


def _moved_ids(index: CellIndex, changed: Sequence[Any], seen: Any) -> list[int]:
    """The old reads' rule: a row moved when its stamps differ from those applied, or its
    newest stamp falls in the second of the last read (whole-second stamps)."""
    known: dict[int, Any] = index.service_stamps
    since = None if seen is None else seen.replace(microsecond=0)

    def moved(r: Sequence[Any]) -> bool:
        if known.get(r[0]) != (r[1], r[2], r[3]):
            return True
        newest = _newest(r)
        return since is not None and newest is not None and newest >= since

    return [r[0] for r in changed if moved(r)]


async def old_read_stamped(
    db: NovaDatabase, index: CellIndex, changed: Sequence[Any], seen: Any = None
) -> readers.ServicesRead:
    """``read_stamped`` before heartbeats were read narrow: every moved row read whole."""
    want = _moved_ids(index, changed, seen)
    rows = await db.fetch(db.sql.services_by_id, want) if want else []
    read = await readers.services_read(index, rows)
    stamps: dict[int, Any] = read.stamps
    stamps.update((r[0], (r[1], r[2], r[3])) for r in changed if r[0] in stamps)  # as before
    return read


# ``before``: the narrow read as it was at 5e4ef54 (every heartbeat row a new ServiceInfo,
# its beat made aware in Python, a coroutine a swapped host), patched in for the phase.
_NARROW_BEFORE = (
    "SELECT id, last_seen_up, updated_at, created_at, deleted_at, {sig}"
    " FROM services WHERE id = ANY($1::int[])"
)


def before_beat_rows(index: CellIndex, rows: Sequence[Any]) -> readers.BeatRows:
    out = readers.BeatRows([], {}, [])
    sigs = index.service_sigs
    for r in rows:
        sid = r[0]
        seen = sigs.get(sid)
        if seen is None or seen[0] != r[5]:
            out.whole.append(sid)
            continue
        svc = with_beat(seen[1], aware(r[1]), aware(r[2]))
        sigs[sid] = (seen[0], svc)
        out.rows.append((sid, svc.host, svc))
        out.stamps[sid] = (r[2], r[3], r[4])  # type: ignore[assignment]
    return out


async def before_read_stamped(
    db: NovaDatabase, index: CellIndex, changed: Sequence[Any], seen: Any = None
) -> readers.ServicesRead:
    want = _moved_ids(index, changed, seen)
    if not want:
        return readers.ServicesRead([], {})
    narrow = _NARROW_BEFORE.format(sig=_signature(PG_SYNTAX))
    beats = before_beat_rows(index, await db.fetch(narrow, want))
    rows = await db.fetch(db.sql.services_by_id, beats.whole) if beats.whole else []
    read = await readers.services_read(index, rows)
    read.rows.extend(beats.rows)
    read.stamps.update(beats.stamps)
    return read


async def before_swap_services(
    self: table.HostTable, cell: table.Cell, nodes: Mapping[str, str]
) -> None:
    services = cell.index.services
    config = self.live.config
    d = config.default
    keep = keep_seconds(
        float(d.service_down_time), float(d.report_interval), config.asyncsched.refresh_interval
    )
    now, report_s = aware_now(), float(d.report_interval)
    for i, (u, h) in enumerate(nodes.items()):
        hs = cell.table.get(u)
        if hs is not None:
            await table.locked(hs, table._swap_service, services.get(h), now, keep, report_s)
        if i % CHUNK == CHUNK - 1:
            await asyncio.sleep(0)


_STAMPS_BEFORE = (
    "SELECT id, updated_at, created_at, deleted_at FROM services"
    " WHERE \"binary\" = 'nova-compute'"
    " AND (updated_at >= $1 OR created_at >= $1 OR deleted_at >= $1)"
)


def before_read_services(narrow: bool) -> Any:
    """``read_services`` before the stamps were one text a row (three timestamps decoded,
    compared in Python), with ``before_read_stamped`` (narrow) or ``old_read_stamped``."""
    saved = readers.read_services

    async def read(
        db: NovaDatabase, index: CellIndex, since: Any, seen: Any = None, held: Any = None
    ) -> readers.ServicesRead:
        if since is None:
            return await saved(db, index, since, seen)
        changed = await db.fetch(_STAMPS_BEFORE, since)
        stamped = before_read_stamped if narrow else old_read_stamped
        return await stamped(db, index, changed, seen)

    return read


@contextlib.contextmanager
def mode(name: str) -> Iterator[None]:
    """``swap``: this tree; ``before``: the narrow read as at 5e4ef54; ``touch``: before
    heartbeats were read narrow or swapped. Patched in for the phase."""
    if name == "swap":
        yield
        return
    if name == "old":
        saved_due = Sweeps.due
        setattr(Sweeps, "due", lambda self, cell: True)  # noqa: B010
        try:
            yield
        finally:
            setattr(Sweeps, "due", saved_due)  # noqa: B010
        return
    saved = readers.read_services, table.swap_beat, table.HostTable.swap_services  # type: ignore[attr-defined]
    setattr(readers, "read_services", before_read_services(name == "before"))  # noqa: B010
    thresholds = gc.get_threshold()
    if name == "before":
        setattr(table.HostTable, "swap_services", before_swap_services)  # noqa: B010
        if gc.get_freeze_count():  # --gc daemon: 5e4ef54's daemon froze, kept the default
            gc.set_threshold(700, 10, 10)
    else:
        setattr(table, "swap_beat", lambda *a: False)  # noqa: B010
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        setattr(readers, "read_services", saved[0])  # noqa: B010
        setattr(table, "swap_beat", saved[1])  # noqa: B010
        setattr(table.HostTable, "swap_services", saved[2])  # noqa: B010


async def report(db: NovaDB, slice_: int) -> None:
    now = utcnow()
    for cell in db.cells:
        await db.cell_execute(
            cell,
            "UPDATE services SET updated_at = $1, last_seen_up = $1 WHERE id % 10 = $2",
            now,
            slice_,
        )


async def phase(
    db: NovaDB, cache: HostStateCache, name: str, seconds: int, every: int
) -> dict[str, float]:
    f = ComputeFilter(config(default={"service_down_time": 60}))
    mask = f.column_mask()
    assert mask is not None
    cols = HostColumns(columns=mask.columns)
    hosts = cache.all_hosts()
    passes: list[float] = []
    requests: list[float] = []
    up: list[int] = []
    with mode(name):
        # not counted: the first pass after a switch reads every row of the overlap again
        # (the stamps the other mode applied), and the rows it changes are built
        await cache.refresh()
        cols.slots(hosts)  # rows built: the phase counts what changes cost
        gen0 = sum(h.generation for h in hosts)
        c_start, w_start = time.process_time(), time.monotonic()
        for sec in range(seconds):
            await report(db, sec % 10)
            if sec % every == 0:
                c0 = time.process_time()
                await cache.refresh()
                passes.append(time.process_time() - c0)
            for _ in range(10):
                c0 = time.process_time()
                ok, _ = mask.run(ColumnView(cols, cols.slots(hosts)), aware_now())
                requests.append(time.process_time() - c0)
                up.append(int(ok.sum()))
                await asyncio.sleep(0.1)
    cpu, wall = time.process_time() - c_start, time.monotonic() - w_start
    return {
        "pass_cpu_ms": statistics.mean(passes) * 1000,
        "request_cpu_ms": statistics.mean(requests) * 1000,
        "cpu_ms_per_s": cpu / wall * 1000,
        "refresh_ms_per_s": sum(passes) / wall * 1000,
        "touches_per_s": (sum(h.generation for h in hosts) - gen0) / wall,
        "hosts_up_min": float(min(up)),
    }


async def run(args: argparse.Namespace) -> None:
    db = NovaDB(prefix="bench_beats")
    await db.create(n_cells=2)
    try:
        uuids = await seed(db, args.hosts)
        for k in range(10):
            await report(db, k)
        async with HostStateCache(db.config(refresh_interval=3600)) as cache:
            assert len(cache.all_hosts()) == len(uuids)
            if args.gc == "daemon":  # as ``Service`` does once the daemon is ready
                gc.collect()
                gc.freeze()
                gc.set_threshold(*DAEMON_GC_THRESHOLDS)
            # the passes are this bench's, every --every s; the heartbeats' keep follows
            # the daemon's interval (bench_candidates: 2 s), not the idle loops' 3600 s
            cache._live.config = db.config(refresh_interval=float(args.every))
            modes = args.modes.split(",")
            for r in range(args.rounds):
                for name in modes[::-1] if r % 2 else modes:
                    got = await phase(db, cache, name, args.phase, args.every)
                    print(
                        f"round {r + 1} {name:5}: pass {got['pass_cpu_ms']:.1f} ms CPU, "
                        f"request column step {got['request_cpu_ms']:.2f} ms CPU, "
                        f"refresher {got['refresh_ms_per_s']:.1f} ms CPU/s, "
                        f"{got['cpu_ms_per_s']:.0f} ms CPU/s in all, "
                        f"{got['touches_per_s']:.0f} touches/s, "
                        f"hosts up (min) {got['hosts_up_min']:.0f}/{len(uuids)}",
                        flush=True,
                    )
    finally:
        await db.drop()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=10000)
    ap.add_argument("--phase", type=int, default=70, help="seconds per mode and round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--modes",
        default="swap,touch",
        help="comma-separated, alternated each round: swap (this tree), old (every beat read"
        " by every pass, as before the sweep), before (the narrow read as at 5e4ef54), touch"
        " (before heartbeats were read narrow or swapped)",
    )
    ap.add_argument(
        "--gc",
        choices=("default", "daemon"),
        default="default",
        help="daemon: freeze the loaded heap and take the daemon's GC thresholds (``before``"
        " runs with the default ones, as 5e4ef54's daemon did)",
    )
    ap.add_argument("--every", type=int, default=2, help="seconds between refresh passes")
    asyncio.run(run(ap.parse_args(argv)))


if __name__ == "__main__":
    main()
