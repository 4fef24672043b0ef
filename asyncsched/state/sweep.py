"""How a refresh pass of a cell reads services: every beat by a sweep, else only what matters.

Why apart from the refresher: the rule of which pass is a sweep and what the passes between
read is the liveness argument of ``fresh`` (its docstring), kept next to it in one small
class. A sweep (every ``fresh.sweep_interval`` s a cell) reads every beat changed since the
previous one; a pass between reads only the services rows that can change a verdict given
the held sets (``sql.service_stamps_verdict``), renewed first if their horizon passed.
"""

from __future__ import annotations

from asyncsched.state.fresh import held_expired, hold, renew_held, sweep_interval
from asyncsched.state.readers import CellRead, Held, ServicesPlan
from asyncsched.state.sql import WATERMARK_OVERLAP
from asyncsched.state.table import Cell, HostTable


class Sweeps:
    """The services side of the refresher's cell passes (it holds the cell's pass lock)."""

    def __init__(self, table: HostTable) -> None:
        self._table = table
        self._live = table.live

    def _down_time(self) -> float:
        return float(self._live.config.default.service_down_time)

    def due(self, cell: Cell) -> bool:
        """Every beat of the cell is read again (``fresh.sweep_interval``)."""
        if cell.sweep_mark is None or cell.swept_at is None:
            return True
        return self._live.clock() - cell.swept_at >= sweep_interval(self._down_time())

    async def plan(self, cell: Cell, *, full: bool, sweep: bool) -> ServicesPlan:
        """A sweep reads every beat changed since the previous one; a pass between reads only
        the rows that can change a verdict, given held sets renewed if their horizon passed."""
        if full:
            return ServicesPlan()
        if sweep:
            assert cell.sweep_mark is not None  # due()
            return ServicesPlan(since=cell.sweep_mark - WATERMARK_OVERLAP)
        fresh = cell.fresh
        if held_expired(fresh):
            await self._renew(cell, read_entered=True)
        return ServicesPlan(held=Held(list(fresh.disabled), list(fresh.forced), list(fresh.silent)))

    async def after(self, cell: Cell, read: CellRead, *, every_beat: bool) -> None:
        """After a read of every beat (full pass, sweep) the held sets are recomputed; after
        a pass between, the rows it read are held as they are now."""
        self._live.metrics["pass_service_rows"] += len(read.services)
        if every_beat:
            cell.sweep_mark, cell.swept_at = read.db_now, self._live.clock()
            await self._renew(cell, read_entered=False)
            return
        for _, _, svc in read.services:
            if svc is not None:
                hold(cell.fresh, svc)

    async def _renew(self, cell: Cell, *, read_entered: bool) -> None:
        config = self._live.config
        await renew_held(
            cell,
            self._table,
            self._down_time(),
            config.asyncsched.refresh_interval,
            read_entered=read_entered,
        )
