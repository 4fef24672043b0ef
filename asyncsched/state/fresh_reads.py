"""The per-request services reads of every cell, begun and awaited for one request.

Why apart: ``fresh`` holds one cell's read and its state; this starts one read per cell for a
request (shared with the requests that arrive together), waits for them at most
``[asyncsched] fresh_services_wait``, and answers a cell that is down, failing or slow from the
cached state. The reads are tasks of the ``Refresher`` (closed with it).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from typing import Any

from asyncsched.exceptions import DatabaseUnavailable
from asyncsched.state.fresh import FRESH_RETRY, FreshWait, SharedRead, fresh_read
from asyncsched.state.refresher import Refresher
from asyncsched.state.table import Cell, HostTable

LOG = logging.getLogger(__name__)


class FreshReads:
    """``HostStateCache.begin_fresh_services``: one shared services read per loaded cell."""

    def __init__(self, table: HostTable, refresher: Refresher) -> None:
        self._table = table
        self._live = table.live
        self._cells = table.cells
        self._refresher = refresher

    async def begin(self) -> FreshWait:
        """Start the reads (their queries are sent before this returns); awaiting the result
        waits for them (bounded, never raises); left unawaited, they still complete."""
        wait = self._live.config.asyncsched.fresh_services_wait
        metrics = self._live.metrics
        pending: dict[asyncio.Task[Any], Cell] = {}
        if wait > 0 and self._refresher.running:
            now = self._live.clock()
            for cell in self._cells.values():
                fresh = cell.fresh
                if not cell.loaded or cell.db.failures or now < fresh.retry_at:
                    metrics["services_fresh_skipped"] += 1
                    continue
                if fresh.shared is None:
                    read = functools.partial(self._read_cell, cell)
                    fresh.shared = SharedRead(read, self._refresher.spawn, spacing=self._spacing)
                task = fresh.shared.request()
                if task is not None:
                    pending[task] = cell
        if pending:
            await asyncio.sleep(0)  # the reads send their queries now
        return FreshWait(functools.partial(self._await, pending, wait))

    def _spacing(self) -> float:
        """Seconds between two reads of one cell: ``fresh_services_spacing``, at most half
        the wait (a request waiting for the next read is never answered from the cache for
        the spacing alone)."""
        opts = self._live.config.asyncsched
        return min(opts.fresh_services_spacing, opts.fresh_services_wait / 2)

    async def _await(self, pending: dict[asyncio.Task[Any], Cell], wait: float) -> None:
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
                self._live.metrics["services_fresh_failures"] += 1
            cell.fresh.retry_at = math.inf
            cell.fresh.last_error = f"slower than fresh_services_wait ({wait} s)"

    async def _read_cell(self, cell: Cell) -> None:
        """One per-request services read of ``cell``; a failure only delays the next."""
        if self._cells.get(cell.uuid) is not cell:
            return
        fresh = cell.fresh
        config, metrics = self._live.config, self._live.metrics
        try:
            await fresh_read(
                cell,
                self._table,
                float(config.default.service_down_time),
                config.asyncsched.refresh_interval,
            )
        except Exception as exc:  # a bug must not stop this cell's reads for good either
            if not isinstance(exc, DatabaseUnavailable):
                LOG.exception("services read of %s failed", cell.db.name)
            elif fresh.last_error is None:
                LOG.warning("services read failed; answering from the cached state: %s", exc)
            metrics["services_fresh_failures"] += 1
            fresh.last_error = str(exc) or type(exc).__name__
            fresh.retry_at = self._live.clock() + FRESH_RETRY
            return
        metrics["services_fresh_reads"] += 1
        fresh.last_error = None
        fresh.retry_at = 0.0
