"""The live mirror of Placement's providers: loaded before READY, refreshed in the background.

It also remembers what this process has claimed since the last refresh it applied (a claim
Placement accepted is in the next snapshot read after it; until then the mirror would show
the capacity as free), so the next request does not pick a host this process just filled.
A refresh failure keeps the last state; readers ask :meth:`PlacementMirror.serving` whether
it is still young enough to answer from.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from asyncsched.common.tasks import cancel_and_wait
from asyncsched.conf.dsn import parse_db_url
from asyncsched.conf.options import Config
from asyncsched.conf.redact import mask_url_passwords
from asyncsched.exceptions import DatabaseUnavailable
from asyncsched.state.db import close_or_terminate
from asyncsched.state.health import MirrorHealth
from asyncsched.state.placement_mirror.connection import MirrorConnection, connect
from asyncsched.state.placement_mirror.model import MirrorState
from asyncsched.state.placement_mirror.reader import Names, Prints, RefreshResult, read
from asyncsched.state.placement_mirror.usage import ProviderUsageReader

LOG = logging.getLogger(__name__)


@dataclass(slots=True)
class _Pending:
    """A claim this process made that the mirror's usage may not include yet."""

    done_at: float
    allocations: dict[str, dict[str, int]]  # rp uuid -> class -> amount


@dataclass(slots=True)
class _Stats:
    refreshes: int = 0
    failures: int = 0
    on_demand: int = 0
    last_ms: float = 0.0
    max_ms: float = 0.0
    total_ms: float = 0.0
    last_changed: int = 0
    last_rows_moved: int = 0
    last_error: str | None = None
    load_ms: float | None = None
    timings: list[float] = field(default_factory=list)
    over_capacity_found: int = 0  # providers seen going over capacity


class PlacementMirror:
    """Component ``placement_mirror``: Placement's providers, usages, traits, aggregates."""

    name = "placement_mirror"

    def __init__(
        self,
        url: str,
        *,
        interval: float,
        max_age: float,
        query_timeout: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = parse_db_url(url)  # ConfigError: not a PostgreSQL or MySQL URL
        self._host = 0  # the address tried first (several: a Galera cluster)
        self.redacted = mask_url_passwords(url)
        self.interval = interval
        self.max_age = max_age
        self.query_timeout = query_timeout
        self._clock = clock
        self.state: MirrorState | None = None
        self._names: Names | None = None
        self._prints: Prints | None = None
        self._snapshot_at: float | None = None  # clock when the last good snapshot began
        self._conn: MirrorConnection | None = None
        self._lock = asyncio.Lock()
        self._seq = 0  # refreshes asked for
        self._seq_done = 0  # every refresh asked for up to this one has been applied
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._applied = asyncio.Event()  # set (and replaced) whenever a refresh is applied
        self._pending: dict[str, _Pending] = {}
        self._pending_sum: dict[str, dict[str, int]] | None = None  # pending_usage(), kept
        self._stats = _Stats()
        self._over: set[str] = set()  # uuids of providers over capacity now
        # the overcommit guard's fresh reads of one provider, on connections of their own
        self.usage = ProviderUsageReader(url, timeout=query_timeout)

    @classmethod
    def from_config(cls, config: Config) -> PlacementMirror | None:
        """The mirror the configuration asks for, or None (no URL, or switched off)."""
        url = config.placement_database.connection
        if not url or not config.asyncsched.placement_mirror:
            return None
        return cls(
            url,
            interval=config.asyncsched.placement_mirror_interval,
            max_age=config.asyncsched.placement_mirror_max_age,
            query_timeout=config.asyncsched.db_query_timeout,
        )

    # ---- lifecycle ----

    async def start(self) -> None:
        """Load everything once (before READY); a failure is logged, served by the GET path."""
        t0 = time.perf_counter()
        try:
            await self.refresh()
            self._stats.load_ms = (time.perf_counter() - t0) * 1000
            state = self.state
            LOG.info(
                "placement mirror: %d providers loaded from %s in %.0f ms",
                0 if state is None else len(state.providers),
                self.redacted,
                self._stats.load_ms,
            )
        except DatabaseUnavailable as exc:
            LOG.warning(
                "placement mirror: cannot load from %s (%s); allocation candidates come from "
                "Placement's API until it can",
                self.redacted,
                exc,
            )
        self._task = asyncio.create_task(self._loop(), name="placement-mirror")

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        await self._drop_conn()
        await self.usage.close()

    def _next_delay(self, failures: int, began: float | None) -> float:
        """Seconds until the next refresh: one interval after the last one *began*, so a
        change Placement commits is applied at most one interval plus one refresh later
        (the lag bound; waiting a whole interval after each refresh ended made it an
        interval plus two refreshes), but never sooner than a tenth of the interval after
        it ended (a refresh longer than the interval still leaves PostgreSQL and the loop
        a gap); backing off after failures."""
        if failures:
            return min(self.interval * 2.0**failures, 10.0)
        if began is None:
            return self.interval
        return max(self.interval - (time.monotonic() - began), self.interval / 10)

    async def _loop(self) -> None:
        failures = 0
        began: float | None = None
        while True:
            delay = self._next_delay(failures, began)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            self._wake.clear()
            began = time.monotonic()
            try:
                await self.refresh()
                failures = 0
            except DatabaseUnavailable:
                failures = min(failures + 1, 8)
            except Exception:  # never let the loop die: log, back off, go on
                LOG.exception("placement mirror: refresh failed unexpectedly")
                failures = min(failures + 1, 8)

    # ---- refresh ----

    async def _drop_conn(self, *, failed: bool = False) -> None:
        """Close the connection; after a failure the next one goes to the next address."""
        conn, self._conn = self._conn, None
        if failed and len(self.url.hosts) > 1:
            self._host = (self._host + 1) % len(self.url.hosts)
        if conn is not None:
            await close_or_terminate(conn, 2.0)

    async def refresh(self) -> None:
        """One refresh now; waits for one in progress first, since it may predate the caller."""
        self._seq += 1
        wanted = self._seq
        async with self._lock:
            if self._seq_done >= wanted:
                return  # a refresh that started after our request has already finished
            started_seq = self._seq
            started = self._clock()
            load = self.state is None  # the first load (or one after a failed one)
            t0 = time.perf_counter()
            try:
                async with asyncio.timeout(self.query_timeout):
                    if self._conn is None or self._conn.is_closed():
                        self._conn = await connect(
                            self.url, host=self._host, connect_timeout=self.query_timeout
                        )
                    async with self._conn.snapshot():
                        result = await read(self._conn, self.state, self._names, self._prints)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                await self._drop_conn(failed=True)
                msg = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                self._fail(msg)
                raise DatabaseUnavailable(f"placement database ({self.redacted}): {msg}") from exc
            self._apply(result, started, (time.perf_counter() - t0) * 1000, load=load)
            self._seq_done = started_seq

    def _fail(self, msg: str) -> None:
        s = self._stats
        if s.last_error is None:
            LOG.warning("placement mirror: database unreachable: %s", msg)
        s.failures += 1
        s.last_error = msg

    def _apply(
        self, result: RefreshResult, started: float, ms: float, *, load: bool = False
    ) -> None:
        s = self._stats
        if s.last_error is not None:
            LOG.warning("placement mirror: database reachable again")
        s.last_error = None
        s.refreshes += 1
        s.last_ms = ms  # a load's too: refresh_bound then errs long, never short
        if load:
            s.load_ms = ms
        else:
            # The refresh figures (p50, max: the lag bound) are the incremental refreshes'
            # only; a full load is load_ms's. At 100,000 providers the load is seconds, the
            # refreshes a fraction of one: counting it made the max the load's duration.
            s.max_ms = max(s.max_ms, ms)
            s.timings = [*s.timings[-199:], ms]
        s.total_ms += ms
        s.last_changed = result.changed
        s.last_rows_moved = result.rows_moved
        self._watch_capacity(self.state, result.state)
        self.state = result.state
        self._names = result.names
        self._prints = result.prints
        self._snapshot_at = started
        # Claims that completed before this snapshot began are in its usage now.
        self._pending = {c: p for c, p in self._pending.items() if p.done_at >= started}
        self._pending_sum = None
        applied, self._applied = self._applied, asyncio.Event()
        applied.set()

    def _watch_capacity(self, old: MirrorState | None, new: MirrorState) -> None:
        """Log and count providers going over capacity, whoever's claims did it: the guard
        only looks at the providers of our own claims (issue #13)."""
        if new is old:  # nothing moved
            return
        before = old.providers if old is not None else {}
        # only the providers this refresh replaced, when the state says which (no pass over
        # every provider on every refresh: 100,000 steps of Python at 100,000 providers)
        moved = None if old is None else new.moved_since(old)
        for pid in new.providers.keys() if moved is None else moved:
            p = new.providers.get(pid)
            if p is None or before.get(pid) is p:  # unchanged since the last refresh
                continue
            over = p.over_capacity()
            if over and p.uuid not in self._over:
                self._stats.over_capacity_found += 1
                LOG.warning(
                    "placement mirror: provider %s (%s) is over capacity: %s",
                    p.uuid,
                    p.name,
                    ", ".join(f"{rc} {u} of {c}" for rc, (u, c) in sorted(over.items())),
                )
            if over:
                self._over.add(p.uuid)
            elif p.uuid in self._over:
                self._over.discard(p.uuid)
                LOG.info("placement mirror: provider %s (%s) fits again", p.uuid, p.name)
        self._over &= new.by_uuid.keys()  # deleted providers

    def refresh_soon(self) -> float:
        """Ask the background task for a refresh now (a claim was refused); returns the
        instant asked at (this mirror's clock), for :meth:`refreshed_since`."""
        self._stats.on_demand += 1
        self._wake.set()
        return self._clock()

    async def refreshed_since(self, at: float) -> bool:
        """Wait, at most :attr:`refresh_bound` s, until the state is a snapshot begun at
        ``at`` or later (this mirror's clock); whether it is."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.refresh_bound):
                while self._snapshot_at is None or self._snapshot_at < at:
                    await self._applied.wait()
        return self._snapshot_at is not None and self._snapshot_at >= at

    @property
    def refresh_bound(self) -> float:
        """How long a refresh asked for now may take to be applied: the interval (one may
        just have begun before the ask) plus twice the last refresh's duration."""
        return self.interval + 2.0 * self._stats.last_ms / 1000.0

    def still_fits(self, allocation_request: Mapping[str, Any]) -> bool:
        """Whether the current state, with this process's claims it does not show yet, has
        room for ``allocation_request``; True where it cannot say (no state, a provider or
        class it does not know): Placement judges the claim."""
        state = self.state
        if state is None:
            return True
        pending = self.pending_usage()
        for rp, alloc in (allocation_request.get("allocations") or {}).items():
            pid = state.by_uuid.get(rp)
            if pid is None:
                continue
            p = state.providers[pid]
            ours = pending.get(rp, {})
            for rc, amount in (alloc.get("resources") or {}).items():
                inv = p.inventories.get(rc)
                if inv is not None and not inv.fits(p.used.get(rc, 0) + ours.get(rc, 0), amount):
                    return False
        return True

    # ---- readers ----

    @property
    def age(self) -> float | None:
        """Seconds since the snapshot of the current state began (None: never loaded)."""
        if self._snapshot_at is None:
            return None
        return self._clock() - self._snapshot_at

    def serving(self) -> tuple[MirrorState | None, str]:
        """(state, "") when candidates may come from the mirror, else (None, why not)."""
        state, age = self.state, self.age
        if state is None or age is None:
            return None, "mirror not loaded" + (
                f": {self._stats.last_error}" if self._stats.last_error else ""
            )
        if age > max(self.max_age, self.interval * 4):
            return None, f"mirror {age:.1f} s old: {self._stats.last_error or 'not refreshed'}"
        return state, ""

    # ---- this process's claims ----

    def note_claimed(self, consumer: str, allocation_request: Mapping[str, Any]) -> None:
        allocs = allocation_request.get("allocations") or {}
        self._pending[consumer] = _Pending(
            self._clock(),
            {rp: dict(a.get("resources") or {}) for rp, a in allocs.items()},
        )
        self._pending_sum = None

    def note_released(self, consumers: Iterable[str]) -> None:
        for c in consumers:
            if self._pending.pop(c, None) is not None:
                self._pending_sum = None

    def pending_usage(self) -> Mapping[str, Mapping[str, int]]:
        """Amounts this process claimed that the current state does not show yet, by rp uuid
        (read-only: the same value until a claim, a release or a refresh changes it, so a
        request between two of those costs nothing here)."""
        if self._pending_sum is None:
            self._pending_sum = self._pending_sums()
        return self._pending_sum

    def _pending_sums(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for p in self._pending.values():
            for rp, res in p.allocations.items():
                acc = out.setdefault(rp, {})
                for rc, n in res.items():
                    acc[rc] = acc.get(rc, 0) + n
        return out

    def health(self) -> MirrorHealth:
        s = self._stats
        state, why = self.serving()
        age = self.age
        timings = sorted(s.timings)
        return MirrorHealth(
            database=self.redacted,
            serving=state is not None,
            reason=why or None,
            providers=0 if self.state is None else len(self.state.providers),
            age_s=None if age is None else round(age, 3),
            interval_s=self.interval,
            max_age_s=self.max_age,
            load_ms=None if s.load_ms is None else round(s.load_ms, 1),
            refreshes=s.refreshes,
            on_demand_refreshes=s.on_demand,
            refresh_failures=s.failures,
            refresh_ms_last=round(s.last_ms, 2),
            refresh_ms_p50=round(timings[len(timings) // 2], 2) if timings else None,
            refresh_ms_max=round(s.max_ms, 2),
            last_changed_providers=s.last_changed,
            last_allocation_rows_moved=s.last_rows_moved,
            pending_claims=len(self._pending),
            last_error=s.last_error,
            guard_usage_queries=self.usage.queries,  # the overcommit guard's reads
            providers_over_capacity=len(self._over),
            over_capacity_found=s.over_capacity_found,
        )
