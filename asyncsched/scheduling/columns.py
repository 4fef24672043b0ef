"""Columnar numeric view of HostStates for the vectorised filters and weighers.

Plugins declare what they read: a weigher its ``column`` (a :class:`Column`), a filter a
:class:`ColumnMask` over columns. The engine registers those columns here and knows no plugin
by name, so a third-party plugin gets the same fast path by declaring one.

Rows are keyed by the HostState object (we keep a reference, so ``id`` stays unique) and
rebuilt only when the host's ``generation`` moved. With the hosts' ChangeLog (the daemon's
host table keeps one) a request over the same list as the last one looks only at the hosts
touched since, and a new list costs one C-level pass (the slot lookup); without a log, two
(slot lookup, generation read). Never a Python loop per filter and weigher.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from operator import attrgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from asyncsched.common.recent import Recent
from asyncsched.state.host_state import ChangeLog, HostState

_GEN = attrgetter("generation")

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]
#: rows rewritten between two turns given to the event loop by :meth:`HostColumns.slots_async`
#: (the heartbeats of 100,000 hosts leave them all stale: one piece held the loop 0.9 s)
WRITE_CHUNK = 4096
#: host lists whose rows are kept (the scheduler keeps a host view per answer, several for
#: a mix of flavors)
KEPT_LISTS = 8
Steps = Generator[None, None, None]


async def stepped(steps: Generator[None, None, Any]) -> Any:
    """What a build in steps returns, a turn given to the event loop at each step."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        await asyncio.sleep(0)


def drained(steps: Generator[None, None, Any]) -> Any:
    """What a build in steps returns, run in one piece."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


@dataclass(frozen=True, slots=True)
class Column:
    """One float64 value per host, computed from its HostState when the host changed.

    ``read`` is the rule itself: a weigher declaring a column scores hosts with it on both
    paths. Two plugins reading the same value share one Column object (see :func:`attribute`).
    """

    name: str
    read: Callable[[HostState], float]


@cache
def attribute(name: str) -> Column:
    """The column of a plain numeric HostState attribute (one object per name)."""
    return Column(name, attrgetter(name))


#: (view over the request's current hosts, now) -> (pass mask, reason code -> count)
MaskFn = Callable[["ColumnView", datetime], tuple[BoolArray, Counter[str]]]


@dataclass(frozen=True, slots=True)
class ColumnMask:
    """A filter's vectorised form: the columns it reads and the mask it computes over them."""

    columns: tuple[Column, ...]
    run: MaskFn


def threshold_mask(column: Column, limit: float, code: str) -> ColumnMask:
    """Hosts pass while ``column < limit``; the others fail with ``code``."""

    def run(view: ColumnView, now: datetime) -> tuple[BoolArray, Counter[str]]:
        ok = view[column] < limit
        bad = int(len(ok) - ok.sum())
        return ok, Counter({code: bad}) if bad else Counter()

    return ColumnMask((column,), run)


@dataclass(frozen=True, slots=True)
class ColumnView:
    """The rows of some hosts (``slots``) in a :class:`HostColumns`."""

    columns: HostColumns
    slots: IntArray

    def __getitem__(self, column: Column) -> FloatArray:
        return self.columns.num[column.name][self.slots]


class HostColumns:
    """One growing set of numpy columns shared by every request of a scheduler."""

    def __init__(self, capacity: int = 1024, columns: Iterable[Column] = ()) -> None:
        self._slot: dict[int, int] = {}
        self._states: list[HostState] = []
        self._columns: dict[str, Column] = {}
        self._writers: list[tuple[FloatArray, Callable[[HostState], float]]] = []
        self.gen: npt.NDArray[np.int64] = np.full(capacity, -1, dtype=np.int64)
        self.num: dict[str, FloatArray] = {}
        self.epoch = 0  # moves when rows are renumbered: anything kept by row is void
        # by id, the last KEPT_LISTS lists given to slots() and their rows: the scheduler's
        # kept host views come back as the same (read-only) lists while their answers stand
        self._lists: Recent[int, tuple[Sequence[HostState], int, IntArray]] = Recent(KEPT_LISTS)
        # Where the hosts' ChangeLog stood when every row was last known current.
        self._mark: tuple[ChangeLog, tuple[int, int]] | None = None
        self.register(columns)

    def __len__(self) -> int:
        return len(self._states)

    @property
    def states(self) -> list[HostState]:
        """The HostState of each row (row number = index)."""
        return self._states

    @property
    def columns(self) -> tuple[Column, ...]:
        return tuple(self._columns.values())

    def register(self, columns: Iterable[Column]) -> None:
        """Add columns (existing rows are rebuilt on their next use).

        Raises ValueError when another column already has the same name.
        """
        added = False
        for col in columns:
            have = self._columns.get(col.name)
            if have is not None:
                if have != col:
                    raise ValueError(f"two different host columns are named {col.name!r}")
                continue
            self._columns[col.name] = col
            self.num[col.name] = np.zeros(len(self.gen))
            added = True
        if added:
            self.gen[:] = -1
            self._mark = None
            self._rewire()

    def _rewire(self) -> None:
        self._writers = [(self.num[c.name], c.read) for c in self._columns.values()]

    def _grow(self, need: int) -> None:
        cap = len(self.gen)
        if need <= cap:
            return
        new = max(need, cap * 2)
        self.gen = np.concatenate([self.gen, np.full(new - cap, -1, dtype=np.int64)])
        for name, arr in self.num.items():
            self.num[name] = np.concatenate([arr, np.zeros(new - cap)])
        self._rewire()

    def _write(self, slot: int, s: HostState) -> None:
        for arr, read in self._writers:
            arr[slot] = read(s)
        self.gen[slot] = s.generation

    def _write_rows(self, rows: IntArray, states: list[HostState]) -> Steps:
        """Rebuild many rows: one list pass and one numpy store per column, a step (a yield)
        every ``WRITE_CHUNK`` rows (the arrays are looked up again after each: a request
        run meanwhile may have grown them)."""
        chunk = WRITE_CHUNK
        for at in range(0, len(rows), chunk):
            if at:
                yield
            part, some = rows[at : at + chunk], states[at : at + chunk]
            for arr, read in self._writers:
                arr[part] = list(map(read, some))
            self.gen[part] = list(map(_GEN, some))

    def slots(self, states: Sequence[HostState]) -> IntArray:
        """Row numbers of ``states`` with every stale row rebuilt, in one piece."""
        got: IntArray = drained(self._slots(states))
        return got

    async def slots_async(self, states: Sequence[HostState]) -> IntArray:
        """As :meth:`slots`, giving the event loop a turn every ``WRITE_CHUNK`` rows."""
        got: IntArray = await stepped(self._slots(states))
        return got

    def _slots(self, states: Sequence[HostState]) -> Generator[None, None, IntArray]:
        """Row numbers of ``states`` with every stale row rebuilt.

        While the hosts' ChangeLog can say what was touched since every row was last known
        current (the mark), only those hosts are looked at, for the same list as last time
        or a new one (a new list, e.g. the host view after a host filled up, then costs the
        row lookup, not also a generation read of every host); otherwise every host of the
        list has its generation compared with its row's. The mark moves once the rows are
        written (a request run meanwhile finds them stale and writes them too).
        """
        n = len(states)
        changes = states[0].changes if n else None
        last = self._lists.get(id(states))
        created: list[int] = []
        if last is not None and last[0] is states and last[1] == self.epoch and len(last[2]) == n:
            idx = last[2]
        else:
            epoch = self.epoch
            idx, created = yield from self._rows(states)
            if self.epoch != epoch:  # renumbered meanwhile (forget_missing): in one piece
                idx, created = drained(self._rows(states))
            idx.flags.writeable = False  # handed to several requests: never changed in place
            self._lists.put(id(states), (states, self.epoch, idx))
        if (yield from self._touched_only(changes)):
            if created:
                rows = np.asarray(created, dtype=np.intp)
                yield from self._write_rows(rows, self._states_at(created))
            return idx
        mark = None if changes is None else (changes, changes.mark())
        gens = np.fromiter(map(_GEN, states), dtype=np.int64, count=n)
        stale = np.flatnonzero(self.gen[idx] != gens)
        if len(stale):
            yield from self._write_rows(idx[stale], [states[i] for i in stale.tolist()])
        # every row is current as of the mark only when this list held every row
        self._mark = mark if mark is not None and self._covers_all(idx) else None
        return idx

    def _states_at(self, rows: list[int]) -> list[HostState]:
        return [self._states[r] for r in rows]

    def _covers_all(self, idx: IntArray) -> bool:
        if len(idx) < len(self._states):
            return False
        seen = np.zeros(len(self._states), dtype=bool)
        seen[idx] = True
        return bool(seen.all())

    def _touched_only(self, changes: ChangeLog | None) -> Generator[None, None, bool]:
        """Rebuild the rows of the hosts touched since the mark; False when the log cannot
        say (none, another log, started over) and every host must be compared."""
        mark = self._mark
        if changes is None or mark is None or mark[0] is not changes:
            return False
        touched = changes.since(mark[1])
        if touched is None:
            return False
        now = (changes, changes.mark())
        stale: dict[int, HostState] = {}
        for s in touched:
            slot = self._slot.get(id(s))
            if slot is not None and self.gen[slot] != s.generation:
                stale[slot] = s
        if stale:
            rows = np.fromiter(stale, dtype=np.intp, count=len(stale))
            yield from self._write_rows(rows, list(stale.values()))
        if self._mark is mark:  # else a request run meanwhile moved it on
            self._mark = now
        return True

    def _rows(
        self, states: Sequence[HostState]
    ) -> Generator[None, None, tuple[IntArray, list[int]]]:
        """The row of each state, and the rows made now for states not seen before (to be
        written: their generation is -1); looked up ``4 * WRITE_CHUNK`` between steps."""
        n = len(states)
        chunk = 4 * WRITE_CHUNK
        got: list[int | None] = []
        for at in range(0, n, chunk):
            if at:
                yield
            got += map(self._slot.get, map(id, states[at : at + chunk]))
        created: list[int] = []
        if None in got:
            for i, slot in enumerate(got):
                if slot is None:
                    s = states[i]
                    slot = self._slot.get(id(s))
                    if slot is None:
                        slot = len(self._states)
                        self._grow(slot + 1)
                        self._states.append(s)
                        self._slot[id(s)] = slot
                        created.append(slot)
                    got[i] = slot
        return np.fromiter(got, dtype=np.intp, count=n), created

    def refresh(self, state: HostState) -> None:
        """Rebuild one host's row now (after this request consumed it)."""
        slot = self._slot.get(id(state))
        if slot is not None and self.gen[slot] != state.generation:
            self._write(slot, state)

    def forget_missing(self, live: Sequence[HostState]) -> None:
        """Drop rows of hosts no longer in the cache (call rarely, e.g. after a full resync)."""
        keep = {id(s) for s in live}
        if all(i in keep for i in self._slot):
            return
        states = [s for s in self._states if id(s) in keep]
        fresh = HostColumns(max(1024, len(states)), self._columns.values())
        fresh.slots(states)
        self._slot, self._states = fresh._slot, fresh._states
        self.gen, self.num, self._writers = fresh.gen, fresh.num, fresh._writers
        self.epoch += 1
