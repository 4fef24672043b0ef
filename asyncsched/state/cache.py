"""The live host table: every compute node of every enabled cell, kept in memory.

Why: upstream nova rebuilds every HostState from the cell databases on each request. Here a
request never waits on a database. ``HostStateCache`` loads all cells in parallel at start, then
refreshes in the background (incremental by ``updated_at``/``created_at``/``deleted_at``
watermarks, plus a periodic full resync), and applies the RPC casts at once.

Consumption a request made (and Placement accepted) is kept on the host as an ``Assumption``
and re-applied over fresh database values until the cell DB shows the instance on that host
or ``[asyncsched] assumed_ttl`` passes. So a host's numbers are always

    DB snapshot  +  the assumptions still pending on it

which makes refresh, release and expiry the same operation (``assumptions.rebase``). For NUMA
and PCI the assumption holds what was placed (fitted guest topology, PCI requests, provider
mapping), re-applied in order over the fresh DB topology and pools; one that no longer fits is
fitted afresh or left out, logged and counted in ``health()`` (``assumed_unfit``).

Each cell and the API database refresh in their own task: a slow or dead database only makes
its own part stale (visible in ``health()``), never blocks the others or any read.

While ImagePropertiesWeigher can matter (``rows.image_props_wanted``: config multiplier non-zero
and the weigher enabled) each cell also keeps its instances' image properties from
``instance_system_metadata`` and every host gets ``extra["instance_image_props"]`` and
``extra["instance_image_prop_counts"]``; otherwise that table is never read.

This class is the façade: lifecycle, loops, reads, consumption, casts and health. The SQL is
in ``sql``, the readers in ``readers`` and ``images``, a cell's index and its diffing in
``index``, the visible host table and host rebuilds in ``table``, the pending consumption in
``assumptions``, the API-DB pass in ``api``.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any

from asyncsched.common.lifecycle import StartClose
from asyncsched.common.pacing import Pacer
from asyncsched.common.recorder import NO_RECORDER, Recorder
from asyncsched.conf.options import Config
from asyncsched.exceptions import ConfigError, DatabaseUnavailable
from asyncsched.objects.models import Aggregate, CellMapping, RequestSpec
from asyncsched.state import assumptions
from asyncsched.state.api import api_pass, wanted_cells
from asyncsched.state.db import NovaDatabase
from asyncsched.state.fresh import (
    FRESH_RETRY,
    FreshWait,
    SharedRead,
    after_refresh,
    fresh_read,
    refresh_held,
)
from asyncsched.state.host_state import HostState, PlacedNumaPci
from asyncsched.state.images import (
    CellImages,
    ImageProps,
    PropsRead,
    read_image_props,
    read_props_of,
)
from asyncsched.state.readers import read_cell
from asyncsched.state.rows import image_props_wanted
from asyncsched.state.sql import WATERMARK_OVERLAP
from asyncsched.state.table import Cell, HostTable, Live, db_health

LOG = logging.getLogger(__name__)


class HostStateCache(StartClose):
    """In-memory HostState table of all enabled cells, refreshed in the background.

    Use as ``async with HostStateCache(config) as cache:`` or ``start()``/``close()``.
    Reads never touch a database and are O(1) per host.
    """

    name = "hoststate"

    def __init__(
        self,
        config: Config,
        *,
        clock: Callable[[], float] | None = None,
        recorder: Recorder = NO_RECORDER,
    ) -> None:
        self._clock: Callable[[], float] = clock or time.monotonic
        self._recorder = recorder
        self._rng = random.Random()
        self._api: NovaDatabase | None = None
        self._api_fp: dict[str, str] = {}
        self._api_lock = asyncio.Lock()
        self._api_loaded = False
        self._api_last_full: float | None = None
        self._host_cell: dict[str, str] = {}  # host_mappings: host -> cell uuid
        self._tasks: set[asyncio.Task[Any]] = set()
        self._api_task: asyncio.Task[None] | None = None
        self._started = False
        self._running = False  # start() finished its initial load; loops are running
        self._closed = False
        self.metrics: dict[str, int] = {
            "assumptions_confirmed": 0,
            "assumptions_expired": 0,
            "assumptions_released": 0,
            "assumptions_refitted": 0,  # a re-apply found the pinning taken; fitted afresh
            "assumptions_unfit": 0,  # a re-apply could not count (part of) NUMA/PCI usage
            "refresh_passes": 0,
            "full_resyncs": 0,
            "refresh_failures": 0,
            "image_props_reads": 0,
            "image_props_failures": 0,
            "services_fresh_reads": 0,  # per-request reads of a cell's services
            "services_fresh_failures": 0,  # ... that failed or outlasted fresh_services_wait
            "services_fresh_skipped": 0,  # a cell answered from the cache without a read
        }
        self._live = Live(config, self._clock, self.metrics, image_props_wanted(config))
        self._table = HostTable(self._live)
        self._cells = self._table.cells  # the same dict, shorter
        self._unusable_cells: dict[str, str] = {}  # enabled cells we cannot load: uuid -> why

    @property
    def _config(self) -> Config:
        return self._live.config

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Full load of the API DB and every enabled cell (in parallel), then refresh tasks.

        Unreachable databases do not make this fail: their part stays empty and stale in
        ``health()`` and is retried in the background with backoff.
        """
        if self._started:
            return
        url = self._config.api_database.connection
        if not url:
            raise ConfigError("[api_database] connection is required by the host-state cache")
        self._api = self._new_db("api", url)
        self._started = True
        await self._api_pass(full=True)
        await asyncio.gather(*(self._cell_pass(c, full=True) for c in list(self._cells.values())))
        # The big load leaves the cyclic GC owing a full collection that would otherwise hit
        # a request later (~0.3 s at 10,000 hosts); pay it now, before the service is ready.
        gc.collect()
        self._running = True
        self._api_task = self._spawn(self._api_loop())
        for cell in self._cells.values():
            self._start_cell_loop(cell)

    async def close(self) -> None:
        """Stop background work and close every pool."""
        self._closed = True
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        dbs = [c.db for c in self._cells.values()]
        if self._api is not None:
            dbs.append(self._api)
        await asyncio.gather(*(db.close() for db in dbs), return_exceptions=True)

    def reconfigure(self, config: Config) -> None:
        """Take a new config (SIGHUP): intervals apply at the next tick, allocation-ratio
        defaults are re-applied to every host, changed DB settings reconnect."""
        old, self._live.config = self._live.config, config
        a, b = old.asyncsched, config.asyncsched
        db_changed = (a.db_pool_size, a.db_query_timeout, a.db_reconnect_max) != (
            b.db_pool_size,
            b.db_query_timeout,
            b.db_reconnect_max,
        )
        if config.database.connection != old.database.connection:
            self._api_fp = {}  # cell URL templates are filled from it: read the cells again
        if self._api is not None and (
            db_changed or config.api_database.connection != old.api_database.connection
        ):
            old_api = self._api
            if config.api_database.connection:
                self._api = self._new_db("api", config.api_database.connection)
                self._api_fp = {}
            self._spawn(old_api.close())
        if db_changed:
            for cell in self._cells.values():
                old_db = cell.db
                cell.db = self._new_db(old_db.name, old_db.url)
                self._spawn(old_db.close())
        if old.default != config.default and self._started:
            self._spawn(self._table.reapply_all())
        wanted = image_props_wanted(config)
        if wanted != self._live.image_props_on:
            self._live.image_props_on = wanted
            LOG.info(
                "instances' image properties %s (ImagePropertiesWeigher %s)",
                "will be loaded" if wanted else "dropped",
                "enabled" if wanted else "off",
            )
            for cell in self._cells.values():
                cell.index.image_props = {}
                cell.index.image_props_loaded = False
                cell.images = CellImages()
            if self._started:
                if wanted:  # load now rather than at the next tick
                    for cell in list(self._cells.values()):
                        self._spawn(self._guarded(self._cell_pass(cell, full=False)))
                else:
                    self._spawn(self._table.reapply_all())

    async def refresh(self, *, full: bool = False) -> None:
        """One refresh pass of the API DB and every cell now (tests, SIGHUP). Never raises
        for an unavailable database: that shows in ``health()``."""
        if not self._started:
            raise RuntimeError("HostStateCache.refresh() before start()")
        await self._api_pass(full=full)
        await asyncio.gather(*(self._cell_pass(c, full=full) for c in list(self._cells.values())))

    def health(self) -> dict[str, Any]:
        """Staleness and age per database, counts, assumption metrics, last errors."""
        now = self._clock()

        cells = {c.uuid: c.health(now, self._live.image_props_on) for c in self._cells.values()}
        api = db_health(self._api, self._api_loaded, now)
        stale = api["stale"] or any(c["stale"] for c in cells.values())
        ready = self._api_loaded and all(c.loaded for c in self._cells.values())
        return {
            "ok": ready and not stale,
            "ready": ready,
            "stale": stale,
            "api": api,
            "cells": cells,
            "unusable_cells": dict(self._unusable_cells),
            "hosts": len(self._table.by_uuid),
            "aggregates": len(self._live.aggs.aggs),
            "assumed": sum(len(h.assumed) for h in self._table.by_uuid.values()),
            "assumed_unfit": sum(
                1 for h in self._table.by_uuid.values() for a in h.assumed.values() if a.conflict
            ),
            **self.metrics,
        }

    # ---- reads ------------------------------------------------------------------------------

    def get_by_uuid(self, uuid: str) -> HostState | None:
        return self._table.by_uuid.get(uuid)

    @property
    def hosts_epoch(self) -> int:
        """Moves whenever a host joins or leaves: a list of hosts built before is stale."""
        return self._table.epoch

    def get_by_uuids(self, uuids: Iterable[str]) -> list[HostState]:
        """Hosts for Placement's provider-summary keys; unknown uuids (nested RPs, other
        clouds, nodes not loaded yet) are skipped."""
        get = self._table.by_uuid.get
        return [h for h in map(get, uuids) if h is not None]

    def get_by_host_node(self, host: str, node: str | None = None) -> list[HostState]:
        nodes = self._table.by_host.get(host)
        if not nodes:
            return []
        if node is None:
            return list(nodes.values())
        hs = nodes.get(node)
        return [] if hs is None else [hs]

    def hosts_in_cell(self, cell_uuid: str) -> list[HostState]:
        cell = self._cells.get(cell_uuid)
        return [] if cell is None else list(cell.table.values())

    def all_hosts(self) -> list[HostState]:
        return list(self._table.by_uuid.values())

    def cells(self) -> list[CellMapping]:
        """Enabled cells, cell0 excluded."""
        return [c.mapping for c in self._cells.values()]

    def aggregates(self) -> list[Aggregate]:
        return list(self._live.aggs.aggs.values())

    def aggregates_for_host(self, host: str) -> tuple[Aggregate, ...]:
        return self._live.aggs.host_aggs.get(host, ())

    def cell_of_host(self, host: str) -> str | None:
        """Cell uuid of a service host (host_mappings, else where its service row is)."""
        cell = self._host_cell.get(host)
        if cell is not None:
            return cell
        for c in self._cells.values():
            if host in c.index.services:
                return c.uuid
        return None

    def is_stale(self, cell_uuid: str) -> bool:
        cell = self._cells.get(cell_uuid)
        return cell is None or cell.db.failures > 0 or not cell.loaded

    async def fresh_services(self) -> None:
        """Make each cell's services (disabled, forced down, last seen up) as fresh as the
        request calling this: wait, at most ``[asyncsched] fresh_services_wait``, for a read
        of each cell's ``services`` that started after the call (shared by the requests
        that arrive together; see ``state.fresh``). A cell that is down, failing or slow is
        answered from the cached state; this never raises."""
        await (await self.begin_fresh_services())

    async def begin_fresh_services(self) -> FreshWait:
        """``fresh_services`` in two steps: start the reads (their queries are sent before
        this returns), do other work meanwhile (Placement's answer), then await the result
        (never raises); left unawaited, the reads still complete and apply."""
        wait = self._config.asyncsched.fresh_services_wait
        pending: dict[asyncio.Task[Any], Cell] = {}
        if wait > 0 and self._running:
            now = self._clock()
            for cell in self._cells.values():
                fresh = cell.fresh
                if not cell.loaded or cell.db.failures or now < fresh.retry_at:
                    self.metrics["services_fresh_skipped"] += 1
                    continue
                if fresh.shared is None:
                    read = functools.partial(self._fresh_cell, cell)
                    fresh.shared = SharedRead(read, self._spawn)
                task = fresh.shared.request()
                if task is not None:
                    pending[task] = cell
        if pending:
            await asyncio.sleep(0)  # the reads send their queries now
        return FreshWait(functools.partial(self._await_fresh, pending, wait))

    async def _await_fresh(self, pending: dict[asyncio.Task[Any], Cell], wait: float) -> None:
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=wait)
        for task in late:  # not waited for again until that read ends
            cell = pending[task]
            if cell.fresh.retry_at != math.inf:
                LOG.warning(
                    "services of %s not read within %.3f s; answering from the cached state",
                    cell.db.name,
                    wait,
                )
                self.metrics["services_fresh_failures"] += 1
            cell.fresh.retry_at = math.inf
            cell.fresh.last_error = f"slower than fresh_services_wait ({wait} s)"

    # ---- consumption ----------------------------------------------------------------------

    async def consume(
        self,
        host: HostState,
        spec: RequestSpec,
        instance_uuid: str,
        *,
        placed: PlacedNumaPci | None = None,
    ) -> None:
        """Apply one instance's consumption under ``host.lock`` and keep it as an assumption.

        The caller must not hold ``host.lock`` (asyncio locks are not re-entrant); a caller
        that does uses ``consume_locked``.
        """
        async with host.lock:
            self.consume_locked(host, spec, instance_uuid, placed=placed)

    def consume_locked(
        self,
        host: HostState,
        spec: RequestSpec,
        instance_uuid: str,
        *,
        placed: PlacedNumaPci | None = None,
    ) -> None:
        """``consume`` for a caller already holding ``host.lock``; nova's arithmetic.

        ``placed`` (from ``resources.numa.consume.place_numa_pci``, which already set the
        host's NUMA topology and PCI pools) is the instance's NUMA/PCI usage: it is re-applied
        over fresh DB values on every refresh and taken out on release.
        """
        assumptions.consume(
            host,
            spec,
            instance_uuid,
            placed=placed,
            now=self._clock(),
            rebase_host=self._table.rebase_host,
            metrics=self.metrics,
        )
        self._table.share_instance(host, instance_uuid)

    async def release(self, host: HostState, instance_uuid: str) -> None:
        """The claim failed (or was rolled back): undo that consumption at once."""
        async with host.lock:
            self.release_locked(host, instance_uuid)

    def release_locked(self, host: HostState, instance_uuid: str) -> None:
        """``release`` for a caller holding ``host.lock``: the host is recomputed without this
        assumption (from its DB snapshot, else from the values before the oldest pending one),
        so exactly its CPUs, pages and PCI devices come free."""
        assumptions.release(
            host, (instance_uuid,), rebase_host=self._table.rebase_host, metrics=self.metrics
        )
        self._table.unshare_instances(host, (instance_uuid,))

    async def release_many(self, consumed: Iterable[tuple[HostState, str]]) -> None:
        """``release`` of many (host, instance) pairs, each host rebuilt once: linear in the
        instances however many share a host. A failure on one host is logged; the others
        are still released."""
        by_host: dict[int, tuple[HostState, list[str]]] = {}
        for host, instance_uuid in consumed:
            by_host.setdefault(id(host), (host, []))[1].append(instance_uuid)
        pacer = Pacer()  # a host of thousands of instances is one step; many hosts are many
        for host, uuids in by_host.values():
            await pacer.tick()
            try:
                async with host.lock:
                    assumptions.release(
                        host, uuids, rebase_host=self._table.rebase_host, metrics=self.metrics
                    )
                self._table.unshare_instances(host, uuids)
            except Exception:
                LOG.exception("release failed on %s", host.nodename)

    # ---- HostStateEvents: the RPC casts ---------------------------------------------------

    async def update_aggregates(self, aggregates: Sequence[Aggregate]) -> None:
        """nova's semantics: replace each aggregate, add its id to the listed hosts and drop
        it from hosts no longer listed."""
        await self._table.set_aggregates(self._live.aggs.update(aggregates))

    async def delete_aggregate(self, aggregate: Aggregate) -> None:
        await self._table.set_aggregates(self._live.aggs.delete(aggregate))

    async def update_instance_info(self, host_name: str, instance_uuids: Sequence[str]) -> None:
        """Known host: add the instances. Unknown host: a list of more than one is taken as
        the full list; otherwise the host's instances are re-read from its cell DB."""
        cell = self._cell_for_host(host_name)
        if cell is None:
            return
        index = cell.index
        known = host_name in index.host_insts or host_name in index.nodes_by_host
        index.host_insts.setdefault(host_name, set())
        if not known and len(instance_uuids) <= 1:
            self._spawn(self._reload_host_instances(cell, host_name))
        touched = index.move_to_host(host_name, instance_uuids)
        await self._table.reconcile(cell, index.nodes_of(touched), confirm=False)

    async def delete_instance_info(self, host_name: str, instance_uuid: str) -> None:
        cell = self._cell_for_host(host_name)
        if cell is None:
            return
        index = cell.index
        if host_name not in index.host_insts and host_name not in index.nodes_by_host:
            self._spawn(self._reload_host_instances(cell, host_name))
            return
        if index.inst_host.get(instance_uuid) == host_name:
            index.move_instance(instance_uuid, None)
        else:
            index.host_insts.get(host_name, set()).discard(instance_uuid)
        # the instance is gone from the host: consumption we still assumed for it is too
        for hs in self.get_by_host_node(host_name):
            if instance_uuid in hs.assumed:
                await self.release(hs, instance_uuid)
        await self._table.reconcile(cell, index.nodes_of({host_name}), confirm=False)

    async def sync_instance_info(self, host_name: str, instance_uuids: Sequence[str]) -> None:
        """A mismatch (or an unknown host) re-reads the host's instances from its cell DB in
        the background; the cast handler never waits on a database."""
        cell = self._cell_for_host(host_name)
        if cell is None:
            return
        ours = cell.index.host_insts.get(host_name)
        if ours is None and host_name in cell.index.nodes_by_host:
            ours = set()  # a host we load from the DB that has no instances
        if ours is None or ours != set(instance_uuids):
            if ours is not None:
                LOG.info(
                    "instance list of host %s differs from the compute's; re-reading it",
                    host_name,
                )
            self._spawn(self._reload_host_instances(cell, host_name))

    # ---- internals: background loops -------------------------------------------------------

    def _new_db(self, name: str, url: str) -> NovaDatabase:
        o = self._config.asyncsched
        return NovaDatabase(
            name,
            url,
            pool_size=o.db_pool_size,
            query_timeout=o.db_query_timeout,
            reconnect_max=o.db_reconnect_max,
            clock=self._clock,
        )

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any] | None:
        if self._closed:  # a cast after close(): nothing to do any more
            coro.close()
            return None
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            LOG.error("host-state background task failed", exc_info=task.exception())

    def _delay(self, db: NovaDatabase | None) -> float:
        o = self._config.asyncsched
        if db is not None and db.failures:
            base = db.retry_delay
        else:
            base = o.refresh_interval
        return base * (1.0 + o.refresh_jitter * self._rng.random())

    def _full_due(self, last_full: float | None) -> bool:
        return (
            last_full is None
            or self._clock() - last_full >= self._config.asyncsched.full_resync_interval
        )

    async def _api_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(self._delay(self._api))
            if await self._still_down(self._api):
                continue
            await self._guarded(self._api_pass(full=self._full_due(self._api_last_full)))

    async def _cell_loop(self, cell: Cell) -> None:
        while not self._closed and self._cells.get(cell.uuid) is cell:
            await asyncio.sleep(self._delay(cell.db))
            if await self._still_down(cell.db):
                continue
            recovering = cell.db.failures > 0 or not cell.loaded
            full = recovering or self._full_due(cell.last_full)
            await self._guarded(self._cell_pass(cell, full=full))

    @staticmethod
    async def _still_down(db: NovaDatabase | None) -> bool:
        """A failed database is probed cheaply; only one that answers gets a full pass."""
        return db is not None and db.failures > 0 and not await db.probe()

    async def _guarded(self, aw: Awaitable[None]) -> None:
        """A bug in one pass must not kill the loop: log it and go on."""
        try:
            await aw
        except asyncio.CancelledError:
            raise
        except Exception:
            LOG.exception("host-state refresh pass failed")

    def _start_cell_loop(self, cell: Cell) -> None:
        if self._running and not self._closed and cell.task is None:
            cell.task = self._spawn(self._cell_loop(cell))

    # ---- internals: API database -------------------------------------------------------

    async def _api_pass(self, *, full: bool) -> None:
        api = self._api
        if api is None:
            return
        async with self._api_lock:
            started = time.perf_counter()
            try:
                fp = await api_pass(
                    api,
                    {} if full else self._api_fp,
                    on_cells=self._apply_cells,
                    on_host_mappings=self._set_host_cells,
                    on_aggregates=self._apply_aggregates,
                )
            except DatabaseUnavailable as exc:
                api.mark_failed(exc)
                self.metrics["refresh_failures"] += 1
                self._record_pass("api", full, started, ok=False)
                return
            self._api_fp = fp
            self._api_loaded = True
            if full:
                self._api_last_full = self._clock()
            api.mark_ok()
            self._record_pass("api", full, started, ok=True)

    def _record_pass(self, database: str, full: bool, started: float, *, ok: bool) -> None:
        kind = "full" if full else "incremental"
        self._recorder.refresh(database, kind, time.perf_counter() - started, ok)

    def _set_host_cells(self, host_cell: dict[str, str]) -> None:
        self._host_cell = host_cell

    async def _apply_cells(self, rows: Sequence[Any]) -> None:
        cells = wanted_cells(rows, self._config.database.connection)
        wanted, self._unusable_cells = cells.rows, dict(cells.unusable)
        for uuid in list(self._cells):
            if uuid not in wanted:
                LOG.warning("cell %s left cell_mappings or was disabled; dropping its hosts", uuid)
                await self._drop_cell(self._cells[uuid])
        for uuid, r in wanted.items():
            mapping = CellMapping(uuid=uuid, name=r["name"], id=r["id"], disabled=False)
            cell = self._cells.get(uuid)
            if cell is not None and cell.db.url != r["database_connection"]:
                LOG.warning("cell %s database_connection changed; reloading it", uuid)
                await self._drop_cell(cell)
                cell = None
            if cell is None:
                try:
                    db = self._new_db(f"cell {r['name'] or uuid}", r["database_connection"])
                except ConfigError as exc:
                    LOG.error("cell %s: %s; its hosts cannot be scheduled", uuid, exc)
                    self._unusable_cells[uuid] = f"cell {r['name'] or uuid}: {exc}"
                    continue
                cell = Cell(mapping=mapping, db=db)
                self._cells[uuid] = cell
                if self._running:  # a new cell while running: load it now
                    self._start_cell_loop(cell)
                    self._spawn(self._guarded(self._cell_pass(cell, full=True)))
            else:
                cell.mapping = mapping

    async def _drop_cell(self, cell: Cell) -> None:
        self._cells.pop(cell.uuid, None)
        if cell.task is not None:
            cell.task.cancel()
        for uuid in list(cell.table):
            self._table.remove(cell, uuid)
        self._spawn(cell.db.close())

    async def _apply_aggregates(self, new: dict[int, Aggregate]) -> None:
        await self._table.set_aggregates(self._live.aggs.replace_all(new))

    # ---- internals: cell databases -----------------------------------------------------

    async def _cell_pass(self, cell: Cell, *, full: bool) -> None:
        if self._cells.get(cell.uuid) is not cell:
            return
        async with cell.pass_lock:
            full = full or cell.watermark is None
            db, index = cell.db, cell.index
            wm = None if cell.watermark is None else cell.watermark - WATERMARK_OVERLAP
            started = time.perf_counter()
            try:
                read = await read_cell(db, index, cell.uuid, None if full else wm)
            except DatabaseUnavailable as exc:
                db.mark_failed(exc)
                self.metrics["refresh_failures"] += 1
                self._record_pass(cell.mapping.name or cell.uuid, full, started, ok=False)
                return
            # After the main reads, not beside them: a failing image-props query (e.g. no
            # such table) discards the pool and must not take the host data down with it.
            props: PropsRead | None = None
            if self._live.image_props_on:
                props = await read_image_props(
                    db,
                    cell.images,
                    cell.mapping.name or cell.uuid,
                    read.insts,
                    full=full or cell.images.full_needed,
                    since=wm,
                    metrics=self.metrics,
                )
            if self._cells.get(cell.uuid) is not cell:
                return  # dropped while we were reading
            if not self._live.image_props_on:
                props = None  # switched off while we were reading
            elif props is not None and props.uuids is None:
                cell.images.full_needed = False
            await self._table.apply_read(cell, read, props, full=full)
            if full:
                cell.index.service_stamps = dict(read.service_stamps)
            else:
                cell.index.service_stamps.update(read.service_stamps)
            if full:
                cell.last_full = self._clock()
                self.metrics["full_resyncs"] += 1
            cell.watermark = read.db_now
            after_refresh(cell.fresh, read.db_now)
            await refresh_held(
                cell.fresh,
                list(cell.index.services.values()),
                float(self._config.default.service_down_time),
                self._config.asyncsched.refresh_interval,
            )
            cell.loaded = True
            cell.last_refresh = self._clock()
            self.metrics["refresh_passes"] += 1
            db.mark_ok()
            self._record_pass(cell.mapping.name or cell.uuid, full, started, ok=True)

    async def _fresh_cell(self, cell: Cell) -> None:
        """One per-request services read of ``cell``; a failure only delays the next."""
        if self._cells.get(cell.uuid) is not cell:
            return
        fresh = cell.fresh
        try:
            await fresh_read(
                cell,
                self._table,
                float(self._config.default.service_down_time),
                self._config.asyncsched.refresh_interval,
            )
        except Exception as exc:  # a bug must not stop this cell's reads for good either
            if not isinstance(exc, DatabaseUnavailable):
                LOG.exception("services read of %s failed", cell.db.name)
            elif fresh.last_error is None:
                LOG.warning("services read failed; answering from the cached state: %s", exc)
            self.metrics["services_fresh_failures"] += 1
            fresh.last_error = str(exc) or type(exc).__name__
            fresh.retry_at = self._clock() + FRESH_RETRY
            return
        self.metrics["services_fresh_reads"] += 1
        fresh.last_error = None
        fresh.retry_at = 0.0

    def _cell_for_host(self, host: str) -> Cell | None:
        uuid = self.cell_of_host(host)
        if uuid is None:
            LOG.debug("instance info for host %s, which is in no known cell; ignored", host)
            return None
        return self._cells.get(uuid)

    async def _reload_host_instances(self, cell: Cell, host: str) -> None:
        """Re-read one host's instance uuids from its cell (nova's _recreate_instance_info)."""
        try:
            rows = await cell.db.fetch(cell.db.sql.instances_of_host, host)
        except DatabaseUnavailable as exc:
            LOG.warning("could not re-read the instances of host %s: %s", host, exc)
            return
        if self._cells.get(cell.uuid) is not cell:
            return
        index = cell.index
        fresh = {r["uuid"] for r in rows}
        images: dict[str, ImageProps] = {}
        missing = [u for u in fresh if u not in index.image_props]
        if self._live.image_props_on and missing:
            # instances whose rows may be older than any watermark: read them now
            images = await read_props_of(cell.db, cell.images, missing, host, self.metrics)
            if self._cells.get(cell.uuid) is not cell:
                return
        await self._table.reload_host(cell, host, fresh, images)
