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
* and, of those, only rows that are disabled, forced down, deleted or new, or that the cache
  holds as disabled, forced down or silent (``FreshState.odd``). A heartbeat of a host the
  cache holds as up changes no verdict: its last_seen_up only ever moves forward, so the
  cached one going stale can only make the cache refuse a host sooner, and such a host is in
  ``odd`` before it looks down (``ODD_HORIZON``).

Concurrent requests share one read (``SharedRead``): one in flight, the next queued for all
who arrived after it started. The wait is bounded (``[asyncsched] fresh_services_wait``): a
cell whose read is slow or failing is answered from the cached state, shown in ``health()``,
and its reads are retried after ``FRESH_RETRY`` seconds. A refresh pass of the cell moves the
window back to its own start (it may have applied an older view than the last fresh read).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from asyncsched.common.clock import as_utc, utcnow
from asyncsched.exceptions import DatabaseUnavailable
from asyncsched.state.host_state import ServiceInfo
from asyncsched.state.index import apply_services
from asyncsched.state.readers import read_stamped
from asyncsched.state.sql import CHUNK, FRESH_OVERLAP, SQL_SERVICES_FRESH

if TYPE_CHECKING:
    from asyncsched.state.table import Cell, HostTable

LOG = logging.getLogger(__name__)

# A cell whose fresh read failed or outlasted the wait is not waited for again this long.
FRESH_RETRY = 1.0
# ``odd`` lists the services whose heartbeat will be older than service_down_time within this
# many refresh intervals (at least ODD_MIN_HORIZON s); it is recomputed at every refresh pass
# of the cell, and by a fresh read when that horizon has passed (a refresh that stalls).
ODD_INTERVALS = 2.5
ODD_MIN_HORIZON = 5.0


class SharedRead:
    """Coalesces concurrent reads: a caller gets a read that starts after its call.

    At most one read runs and one waits to start; every caller that arrives while a read runs
    joins the waiting one. A caller that stops waiting (timeout, cancel) never cancels it.
    """

    def __init__(
        self,
        read: Callable[[], Awaitable[None]],
        spawn: Callable[[Any], asyncio.Task[Any] | None],
    ) -> None:
        self._read = read
        self._spawn = spawn
        self._running: asyncio.Task[Any] | None = None
        self._queued: asyncio.Task[Any] | None = None

    @property
    def running(self) -> bool:
        return self._running is not None

    def request(self) -> asyncio.Task[Any] | None:
        """The read this caller waits for (None when the owner is closed)."""
        if self._queued is not None:
            return self._queued
        prev = self._running
        task = self._spawn(self._run(prev))
        if prev is None:
            self._running = task
        else:
            self._queued = task
        return task

    async def _run(self, prev: asyncio.Task[Any] | None) -> None:
        if prev is not None:
            await asyncio.wait((prev,))
        me = asyncio.current_task()
        self._running, self._queued = me, None
        try:
            await self._read()
        finally:
            if self._running is me:
                self._running = None


@dataclass(eq=False)
class FreshState:
    """One cell's per-request services reads; mutated only by the cache and this module."""

    mark: datetime | None = None  # DB instant of the last services view (fresh or refresh)
    gen: int = 0  # moves at every refresh pass: a fresh read begun before keeps no mark
    odd: set[int] = field(default_factory=set)  # services.id held disabled, forced or silent
    odd_until: float = 0.0  # UTC timestamp when ``odd`` must be recomputed
    retry_at: float = 0.0  # monotonic: skip this cell's fresh reads until then
    last_error: str | None = None
    shared: SharedRead | None = None

    def health(self, now: float) -> dict[str, Any]:
        return {
            "ok": now >= self.retry_at,
            "last_error": self.last_error,
            "held_odd": len(self.odd),
        }


async def refresh_odd(
    fresh: FreshState, services: Iterable[ServiceInfo], down_time: float, interval: float
) -> None:
    """Recompute ``odd`` (the services disabled, forced down, or whose heartbeat will be older
    than ``down_time`` within the horizon, or missing), good until the horizon."""
    horizon = max(ODD_INTERVALS * interval, ODD_MIN_HORIZON)
    now = utcnow()
    cutoff = now - timedelta(seconds=down_time - horizon)
    odd: set[int] = set()
    for i, svc in enumerate(services):
        beat = svc.heartbeat
        if svc.disabled or svc.forced_down or beat is None or as_utc(beat) < cutoff:
            odd.add(svc.id)
        if i % (4 * CHUNK) == 4 * CHUNK - 1:
            await asyncio.sleep(0)
    fresh.odd = odd
    fresh.odd_until = now.timestamp() + horizon


def after_refresh(fresh: FreshState, read_at: datetime) -> None:
    """A refresh pass whose view is as of ``read_at`` was applied: look back to it."""
    fresh.gen += 1
    fresh.mark = read_at if fresh.mark is None else min(fresh.mark, read_at)


async def fresh_read(cell: Cell, table: HostTable, down_time: float, interval: float) -> None:
    """One fresh read of ``cell`` applied to ``table``. Raises ``DatabaseUnavailable``."""
    fresh: FreshState = cell.fresh
    index = cell.index
    if fresh.mark is None:
        return  # never read: the refresh's full load comes first
    if utcnow().timestamp() >= fresh.odd_until:
        await refresh_odd(fresh, list(index.services.values()), down_time, interval)
    gen = fresh.gen
    rows = await cell.db.fetch(SQL_SERVICES_FRESH, fresh.mark - FRESH_OVERLAP, list(fresh.odd))
    if not rows:
        raise DatabaseUnavailable(f"{cell.db.name}: no clock row from the services read")
    changed = [(r[1], r[2], r[3], r[4]) for r in rows if r[1] is not None]
    read = await read_stamped(cell.db, index, changed)
    dirty, swapped = apply_services(index, read.rows)
    index.service_stamps.update(read.stamps)
    for _, _, svc in read.rows:
        if svc is not None and (svc.disabled or svc.forced_down):
            fresh.odd.add(svc.id)
    if dirty:
        await table.reconcile(cell, index.nodes_of(dirty), confirm=False)
    if swapped:
        await table.swap_services(cell, {u: h for h in swapped for u in index.nodes_of((h,))})
    if fresh.gen == gen:
        fresh.mark = rows[0][0]
