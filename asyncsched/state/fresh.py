"""Services as fresh as nova's per-request read: a small delta of ``services`` per request.

Why: nova-scheduler reads the services table on every request, so a host enabled through the
API is taken by the next request and one just disabled, forced down or silent is refused. The
cache's refresh runs every ``refresh_interval``; in between, each request first waits for a
read of each cell's ``services`` that *started after it arrived* (``HostStateCache.
fresh_services``). The read is cheap because it asks only for what can change a verdict:

* rows changed since the previous read's instant (DB clock) minus ``FRESH_OVERLAP`` (a row's
  ``updated_at`` comes from the writer's clock, whole seconds on MySQL, and is a little older
  than its commit; re-reading is idempotent: rows are fetched whole only when their stamp is
  not the one applied),
* and, of those, only rows disabled or forced down other than the cache holds them
  (``FreshState.disabled``, ``.forced``), deleted or new rows, and rows of the services the
  cache holds as silent (``.silent``). A heartbeat of a host held up, disabled or forced down
  changes no verdict: last_seen_up only ever moves forward, so the cached one going stale
  can only make the cache refuse a host sooner, and a host is in ``silent`` before it looks
  down (``SILENT_INTERVALS``).

The refresh passes use the same rule (``sql._can_change_verdict``): every beat of a cell is
read by a *sweep* every S = ``sweep_interval`` = min(service_down_time / 4, ``SWEEP_MAX``)
seconds, the passes between read only the rows above. Liveness stays exact:

* a live host is never judged down: its known beat is at most a report interval, S and a pass
  old, short of service_down_time by the silent horizon at least; and a host whose known beat
  grows that old (a sweep late behind a slow database) *enters* ``silent`` when the held sets
  are recomputed, and its current beat is read by id at once (``renew_held``);
* a host that stops beating is judged down at the same instant as before: its known beat is
  its last one once the sweep after it (or the silent set's read) brought it, before it can
  matter (the silent horizon), and down is now - that beat > service_down_time;
* a host that comes back (silent, then beats) is taken by the next request: any change of a
  silent row is read by the fresh read and the next pass.

Concurrent requests share one read (``SharedRead``): one in flight, the next queued for all
who arrived after it started. The wait is bounded (``[asyncsched] fresh_services_wait``): a
cell whose read is slow or failing is answered from the cached state, shown in ``health()``,
and its reads are retried after ``FRESH_RETRY`` seconds. A refresh pass of the cell moves the
window back to its own start (it may have applied an older view than the last fresh read).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Generator, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from asyncsched.common.clock import as_utc, utcnow
from asyncsched.exceptions import DatabaseUnavailable
from asyncsched.state.health import FreshHealth, HeldServices
from asyncsched.state.host_state import ServiceInfo
from asyncsched.state.index import apply_services
from asyncsched.state.readers import read_stamped
from asyncsched.state.sql import CHUNK, FRESH_OVERLAP

if TYPE_CHECKING:
    from asyncsched.state.table import Cell, HostTable

LOG = logging.getLogger(__name__)

# A cell whose fresh read failed or outlasted the wait is not waited for again this long.
FRESH_RETRY = 1.0
# ``silent`` lists the services whose heartbeat will be older than service_down_time within
# this many refresh intervals (at least SILENT_MIN_HORIZON s); the held sets are recomputed
# after every read of every beat (a full pass, a sweep), and by a refresh pass or a fresh read
# once that horizon has passed.
SILENT_INTERVALS = 2.5
SILENT_MIN_HORIZON = 5.0
# Every beat of a cell is read by a sweep every min(service_down_time / 4, SWEEP_MAX) s; the
# refresh passes between two sweeps read only the services rows that can change a verdict
# (``sql.service_stamps_verdict``). 15 s: a quarter of nova's default service_down_time (60 s),
# so a deployment with a long down time (a benchmark's day) still pays what a cloud pays.
SWEEP_MAX = 15.0


def sweep_interval(down_time: float) -> float:
    """Seconds between two sweeps of every beat of a cell."""
    return min(down_time / 4.0, SWEEP_MAX)


# Seconds the reads of a cell stay spaced (``fresh_services_spacing``) after a request arrived
# while one of them ran or waited to start: requests that overlap share reads.
CROWD_HOLD = 1.0


class SharedRead:
    """Coalesces concurrent reads: a caller gets a read that starts after its call.

    At most one read runs and one waits to start; every caller that arrives while a read runs
    (or while the next one waits to start) joins the waiting one. A caller that stops waiting
    (timeout, cancel) never cancels it. While requests overlap (one arrived while a read ran
    or waited, within the last ``CROWD_HOLD`` seconds), reads start at least ``spacing()``
    seconds apart: a request arriving sooner after the last start waits for the next read,
    which the requests of that time share. A lone caller (no request ever arrives while a
    read is under way) is never held back.
    """

    def __init__(
        self,
        read: Callable[[], Awaitable[None]],
        spawn: Callable[[Any], asyncio.Task[Any] | None],
        *,
        spacing: Callable[[], float] = lambda: 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._spawn = spawn
        self._spacing = spacing
        self._clock = clock
        self._running: asyncio.Task[Any] | None = None
        self._queued: asyncio.Task[Any] | None = None
        self._started_at = -math.inf  # clock() when the last read started
        self._crowd_until = -math.inf  # clock() until which reads are spaced
        self.reads = 0  # reads started

    @property
    def running(self) -> bool:
        return self._running is not None

    def request(self) -> asyncio.Task[Any] | None:
        """The read this caller waits for (None when the owner is closed)."""
        now = self._clock()
        if self._queued is not None or self._running is not None:
            self._crowd_until = now + CROWD_HOLD  # requests overlap: space the reads
        if self._queued is not None:
            return self._queued
        prev = self._running
        task = self._spawn(self._run(prev))
        if task is None:
            return None
        if prev is None and now >= self._next_start():
            self._running = task
        else:  # after the running one, or not before the spacing is over
            self._queued = task
        return task

    def _next_start(self) -> float:
        """The earliest clock() the next read may start at."""
        if self._clock() >= self._crowd_until:
            return -math.inf
        return self._started_at + self._spacing()

    async def _run(self, prev: asyncio.Task[Any] | None) -> None:
        if prev is not None:
            await asyncio.wait((prev,))
        delay = self._next_start() - self._clock()
        if delay > 0:
            await asyncio.sleep(delay)
        me = asyncio.current_task()
        self._running = me
        if self._queued is me:
            self._queued = None
        self._started_at = self._clock()
        self.reads += 1
        try:
            await self._read()
        finally:
            if self._running is me:
                self._running = None


class FreshWait:
    """What ``HostStateCache.begin_fresh_services`` returns: awaiting it waits for the reads
    begun (bounded); it holds no coroutine until awaited, so leaving it is harmless."""

    __slots__ = ("_wait",)

    def __init__(self, wait: Callable[[], Awaitable[None]]) -> None:
        self._wait = wait

    def __await__(self) -> Generator[Any, None, None]:
        return self._wait().__await__()


@dataclass(eq=False)
class FreshState:
    """One cell's per-request services reads; mutated only by the cache and this module."""

    mark: datetime | None = None  # DB instant of the last services view (fresh or refresh)
    gen: int = 0  # moves at every refresh pass: a fresh read begun before keeps no mark
    # services.id the cache holds disabled, forced down, silent (heartbeat old or missing)
    disabled: set[int] = field(default_factory=set)
    forced: set[int] = field(default_factory=set)
    silent: set[int] = field(default_factory=set)
    held_until: float = 0.0  # UTC timestamp when the held sets must be recomputed
    entered_reads: int = 0  # reads by id of the services that entered ``silent``
    retry_at: float = 0.0  # monotonic: skip this cell's fresh reads until then
    last_error: str | None = None
    shared: SharedRead | None = None

    def health(self, now: float) -> FreshHealth:
        return FreshHealth(
            ok=now >= self.retry_at,
            last_error=self.last_error,
            held=HeldServices(
                disabled=len(self.disabled), forced_down=len(self.forced), silent=len(self.silent)
            ),
        )


async def refresh_held(
    fresh: FreshState, services: Iterable[ServiceInfo], down_time: float, interval: float
) -> None:
    """Recompute the held sets from the cache's services, good until the horizon: silent
    are those whose heartbeat is missing or will be older than ``down_time`` by then."""
    horizon = max(SILENT_INTERVALS * interval, SILENT_MIN_HORIZON)
    now = utcnow()
    cutoff = now - timedelta(seconds=down_time - horizon)
    disabled: set[int] = set()
    forced: set[int] = set()
    silent: set[int] = set()
    for i, svc in enumerate(services):
        if svc.disabled:
            disabled.add(svc.id)
        if svc.forced_down:
            forced.add(svc.id)
        beat = svc.heartbeat
        if beat is None or as_utc(beat) < cutoff:
            silent.add(svc.id)
        if i % (4 * CHUNK) == 4 * CHUNK - 1:
            await asyncio.sleep(0)
    fresh.disabled, fresh.forced, fresh.silent = disabled, forced, silent
    fresh.held_until = now.timestamp() + horizon


def hold(fresh: FreshState, svc: ServiceInfo) -> None:
    """A row the fresh read applied: held as it is now."""
    for held, flag in ((fresh.disabled, svc.disabled), (fresh.forced, svc.forced_down)):
        if flag:
            held.add(svc.id)
        else:
            held.discard(svc.id)


def after_refresh(fresh: FreshState, read_at: datetime) -> None:
    """A refresh pass whose view is as of ``read_at`` was applied: look back to it."""
    fresh.gen += 1
    fresh.mark = read_at if fresh.mark is None else min(fresh.mark, read_at)


def held_expired(fresh: FreshState) -> bool:
    """The held sets' horizon has passed: recompute them before they are used."""
    return utcnow().timestamp() >= fresh.held_until


async def renew_held(
    cell: Cell, table: HostTable, down_time: float, interval: float, *, read_entered: bool
) -> None:
    """Recompute the held sets (``refresh_held``); with ``read_entered``, read at once by id
    the services that entered ``silent``: their known beat may be as old as the last sweep
    (a sweep late behind a slow database), and from now on only their changes are read."""
    fresh = cell.fresh
    before = fresh.silent
    await refresh_held(fresh, list(cell.index.services.values()), down_time, interval)
    entered = fresh.silent - before
    if read_entered and entered:
        fresh.entered_reads += 1
        await apply_changed(cell, table, [(sid, None, True) for sid in sorted(entered)])


async def apply_changed(cell: Cell, table: HostTable, changed: list[tuple[Any, Any, bool]]) -> None:
    """Read the services rows ``changed`` (id, stamp, recent: see ``read_stamped``) and apply
    them to ``table``, held as they are now."""
    index = cell.index
    read = await read_stamped(cell.db, index, changed)
    dirty, swapped = apply_services(index, read.rows)
    index.service_stamps.update(read.stamps)
    for _, _, svc in read.rows:
        if svc is not None:
            hold(cell.fresh, svc)
    if dirty:
        await table.reconcile(cell, index.nodes_of(dirty), confirm=False)
    if swapped:
        await table.swap_services(cell, {u: h for h in swapped for u in index.nodes_of((h,))})


async def fresh_read(cell: Cell, table: HostTable, down_time: float, interval: float) -> None:
    """One fresh read of ``cell`` applied to ``table``. Raises ``DatabaseUnavailable``."""
    fresh: FreshState = cell.fresh
    if fresh.mark is None:
        return  # never read: the refresh's full load comes first
    if held_expired(fresh):
        await renew_held(cell, table, down_time, interval, read_entered=True)
    gen = fresh.gen
    rows = await cell.db.fetch(
        cell.db.sql.services_fresh,
        fresh.mark - FRESH_OVERLAP,
        list(fresh.disabled),
        list(fresh.forced),
        list(fresh.silent),
    )
    if not rows:
        raise DatabaseUnavailable(f"{cell.db.name}: no clock row from the services read")
    # every row of the look-back window read (recent): a writer's stamp (whole seconds on
    # MySQL) may equal the one applied yet belong to a later write, committed after the last
    # read
    await apply_changed(cell, table, [(r[1], r[2], True) for r in rows if r[1] is not None])
    if fresh.gen == gen:
        fresh.mark = rows[0][0]
