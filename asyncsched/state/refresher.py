"""The background side of the host-state cache: every database read that is not a request's.

Why apart from the façade: requests read the table (``cache``) and never wait here. The
refresher owns the API database and every cell's database, the initial load, one refresh loop
per database with its backoff, the API pass (cells, host mappings, aggregates) and the cell
passes (services: only the rows that can change a verdict, every beat by a sweep every
``fresh.sweep_interval``), the re-read of one host's instances that a cast asks for, and
every task it spawns (``spawn``: closed with it). Each cell and the API database refresh in
their own task: a slow or dead database only makes its own part stale, never blocks the
others or any read.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import random
import time
from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any

from asyncsched.common.recorder import Recorder
from asyncsched.conf.options import Config
from asyncsched.exceptions import ConfigError, DatabaseUnavailable
from asyncsched.objects.models import Aggregate, CellMapping
from asyncsched.state.api import api_pass, wanted_cells
from asyncsched.state.db import NovaDatabase
from asyncsched.state.fresh import after_refresh
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
from asyncsched.state.sweep import Sweeps
from asyncsched.state.table import Cell, HostTable

LOG = logging.getLogger(__name__)


class Refresher:
    """Loads the API database and every enabled cell, then keeps them fresh in the background.

    Shares the ``HostTable`` (and its ``Live``: config, clock, metrics) with the cache façade,
    which reads it; this class is the only writer besides the casts and consumption.
    """

    def __init__(self, table: HostTable, recorder: Recorder) -> None:
        self._table = table
        self._live = table.live
        self._cells = table.cells  # the same dict, shorter
        self._clock = table.live.clock
        self._recorder = recorder
        self._sweeps = Sweeps(table)
        self._rng = random.Random()
        self.api: NovaDatabase | None = None
        self._api_fp: dict[str, str] = {}
        self._api_lock = asyncio.Lock()
        self.api_loaded = False
        self._api_last_full: float | None = None
        self.host_cell: dict[str, str] = {}  # host_mappings: host -> cell uuid
        self.unusable_cells: dict[str, str] = {}  # enabled cells we cannot load: uuid -> why
        self._tasks: set[asyncio.Task[Any]] = set()
        self._api_task: asyncio.Task[None] | None = None
        self.started = False
        self.running = False  # start() finished its initial load; loops are running
        self._closed = False

    @property
    def _config(self) -> Config:
        return self._live.config

    @property
    def _metrics(self) -> dict[str, int]:
        return self._live.metrics

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Full load of the API DB and every enabled cell (in parallel), then the loops."""
        if self.started:
            return
        url = self._config.api_database.connection
        if not url:
            raise ConfigError("[api_database] connection is required by the host-state cache")
        self.api = self._new_db("api", url)
        self.started = True
        await self._api_pass(full=True)
        await asyncio.gather(*(self._cell_pass(c, full=True) for c in list(self._cells.values())))
        # The big load leaves the cyclic GC owing a full collection that would otherwise hit
        # a request later (~0.3 s at 10,000 hosts); pay it now, before the service is ready.
        # A process that holds the collector off while it starts (the daemon) collects once
        # itself when everything is loaded.
        if gc.isenabled():
            gc.collect()
        self.running = True
        self._api_task = self.spawn(self._api_loop())
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
        if self.api is not None:
            dbs.append(self.api)
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
        if self.api is not None and (
            db_changed or config.api_database.connection != old.api_database.connection
        ):
            old_api = self.api
            if config.api_database.connection:
                self.api = self._new_db("api", config.api_database.connection)
                self._api_fp = {}
            self.spawn(old_api.close())
        if db_changed:
            for cell in self._cells.values():
                old_db = cell.db
                cell.db = self._new_db(old_db.name, old_db.url)
                self.spawn(old_db.close())
        if old.default != config.default and self.started:
            self.spawn(self._table.reapply_all())
        self._image_props_switch(config)

    def _image_props_switch(self, config: Config) -> None:
        wanted = image_props_wanted(config)
        if wanted == self._live.image_props_on:
            return
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
        if self.started:
            if wanted:  # load now rather than at the next tick
                for cell in list(self._cells.values()):
                    self.spawn(self.guarded(self._cell_pass(cell, full=False)))
            else:
                self.spawn(self._table.reapply_all())

    async def refresh(self, *, full: bool = False) -> None:
        """One refresh pass of the API DB and every cell now (tests, SIGHUP). Never raises
        for an unavailable database: that shows in ``health()``."""
        if not self.started:
            raise RuntimeError("HostStateCache.refresh() before start()")
        await self._api_pass(full=full)
        await asyncio.gather(*(self._cell_pass(c, full=full) for c in list(self._cells.values())))

    def cell_of_host(self, host: str) -> str | None:
        """Cell uuid of a service host (host_mappings, else where its service row is)."""
        cell = self.host_cell.get(host)
        if cell is not None:
            return cell
        for c in self._cells.values():
            if host in c.index.services:
                return c.uuid
        return None

    # ---- tasks and loops ------------------------------------------------------------------

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

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any] | None:
        """Run ``coro`` as a task owned by the cache (cancelled by ``close``); after close,
        nothing: a cast after close() has nothing to do any more."""
        if self._closed:
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
            await asyncio.sleep(self._delay(self.api))
            if await self._still_down(self.api):
                continue
            await self.guarded(self._api_pass(full=self._full_due(self._api_last_full)))

    async def _cell_loop(self, cell: Cell) -> None:
        while not self._closed and self._cells.get(cell.uuid) is cell:
            await asyncio.sleep(self._delay(cell.db))
            if await self._still_down(cell.db):
                continue
            recovering = cell.db.failures > 0 or not cell.loaded
            full = recovering or self._full_due(cell.last_full)
            await self.guarded(self._cell_pass(cell, full=full))

    @staticmethod
    async def _still_down(db: NovaDatabase | None) -> bool:
        """A failed database is probed cheaply; only one that answers gets a full pass."""
        return db is not None and db.failures > 0 and not await db.probe()

    @staticmethod
    async def guarded(aw: Awaitable[None]) -> None:
        """A bug in one pass must not kill the loop: log it and go on."""
        try:
            await aw
        except asyncio.CancelledError:
            raise
        except Exception:
            LOG.exception("host-state refresh pass failed")

    def _start_cell_loop(self, cell: Cell) -> None:
        if self.running and not self._closed and cell.task is None:
            cell.task = self.spawn(self._cell_loop(cell))

    def _record_pass(self, database: str, full: bool, started: float, *, ok: bool) -> None:
        kind = "full" if full else "incremental"
        self._recorder.refresh(database, kind, time.perf_counter() - started, ok)

    # ---- the API database -----------------------------------------------------------------

    async def _api_pass(self, *, full: bool) -> None:
        api = self.api
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
                self._metrics["refresh_failures"] += 1
                self._record_pass("api", full, started, ok=False)
                return
            self._api_fp = fp
            self.api_loaded = True
            if full:
                self._api_last_full = self._clock()
            api.mark_ok()
            self._record_pass("api", full, started, ok=True)

    def _set_host_cells(self, host_cell: dict[str, str]) -> None:
        self.host_cell = host_cell

    async def _apply_cells(self, rows: Sequence[Any]) -> None:
        cells = wanted_cells(rows, self._config.database.connection)
        wanted, self.unusable_cells = cells.rows, dict(cells.unusable)
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
                    self.unusable_cells[uuid] = f"cell {r['name'] or uuid}: {exc}"
                    continue
                cell = Cell(mapping=mapping, db=db)
                self._cells[uuid] = cell
                if self.running:  # a new cell while running: load it now
                    self._start_cell_loop(cell)
                    self.spawn(self.guarded(self._cell_pass(cell, full=True)))
            else:
                cell.mapping = mapping

    async def _drop_cell(self, cell: Cell) -> None:
        self._cells.pop(cell.uuid, None)
        if cell.task is not None:
            cell.task.cancel()
        for uuid in list(cell.table):
            self._table.remove(cell, uuid)
        self.spawn(cell.db.close())

    async def _apply_aggregates(self, new: dict[int, Aggregate]) -> None:
        await self._table.set_aggregates(self._live.aggs.replace_all(new))

    # ---- the cell databases ---------------------------------------------------------------

    async def _cell_pass(self, cell: Cell, *, full: bool) -> None:
        if self._cells.get(cell.uuid) is not cell:
            return
        async with cell.pass_lock:
            full = full or cell.watermark is None
            db, index = cell.db, cell.index
            wm = None if cell.watermark is None else cell.watermark - WATERMARK_OVERLAP
            sweep = not full and self._sweeps.due(cell)
            started = time.perf_counter()
            try:
                plan = await self._sweeps.plan(cell, full=full, sweep=sweep)
                read = await read_cell(db, index, cell.uuid, None if full else wm, plan)
            except DatabaseUnavailable as exc:
                db.mark_failed(exc)
                self._metrics["refresh_failures"] += 1
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
                    metrics=self._metrics,
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
                self._metrics["full_resyncs"] += 1
            cell.watermark = read.db_now
            after_refresh(cell.fresh, read.db_now)
            await self._sweeps.after(cell, read, every_beat=full or sweep)
            if sweep:
                self._metrics["beat_sweeps"] += 1
            cell.loaded = True
            cell.last_refresh = self._clock()
            self._metrics["refresh_passes"] += 1
            db.mark_ok()
            self._record_pass(cell.mapping.name or cell.uuid, full, started, ok=True)

    async def reload_host_instances(self, cell: Cell, host: str) -> None:
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
            images = await read_props_of(cell.db, cell.images, missing, host, self._metrics)
            if self._cells.get(cell.uuid) is not cell:
                return
        await self._table.reload_host(cell, host, fresh, images)
