"""The mirror's root providers as numpy columns, so one request filters 10,000 hosts in a few
vectorised steps instead of a Python loop.

Built once per mirror state (a refresh that changes nothing keeps the state, and with it this
index). Traits and aggregates are interned sets in the mirror, so each root carries the id of
its set and a trait's mask is one lookup per distinct set.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from asyncsched.scheduling.columns import drained
from asyncsched.state.placement_mirror import MirrorState, Provider

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]

#: roots built into an answer between two turns given to the event loop (about 40 ms of CPU
#: at 20 us a root; a class column's row costs a quarter of that): a build over 100,000 roots
#: must not hold the loop for seconds (issue #24)
BUILD_CHUNK = 2048


@dataclass(frozen=True, slots=True)
class ClassColumns:
    """Inventory and usage of one resource class over every root (absent: ``has`` False)."""

    has: BoolArray
    usable: npt.NDArray[np.float64]  # (total - reserved) * allocation_ratio
    used: npt.NDArray[np.int64]
    min_unit: npt.NDArray[np.int64]
    max_unit: npt.NDArray[np.int64]
    step: npt.NDArray[np.int64]

    def fits(self, amount: int, rows: IntArray | None = None) -> BoolArray:
        """Placement's capacity clause for ``amount`` on every root at once (or on those at
        ``rows``)."""
        if rows is not None:
            return ClassColumns(*(a[rows] for a in self.columns())).fits(amount)
        ok: BoolArray = (
            self.has
            & (self.used + amount <= self.usable)
            & (self.min_unit <= amount)
            & (self.max_unit >= amount)
            & (amount % self.step == 0)
        )
        return ok

    def columns(self) -> tuple[npt.NDArray[Any], ...]:
        return (self.has, self.usable, self.used, self.min_unit, self.max_unit, self.step)


class _SetColumn:
    """Which interned set (of traits, or of aggregates) each root has, by set number."""

    def __init__(self, sets: list[frozenset[str]]) -> None:
        self.index: dict[frozenset[str], int] = {}
        self.ids = np.fromiter(
            (self.index.setdefault(s, len(self.index)) for s in sets),
            dtype=np.int32,
            count=len(sets),
        )
        self.masks: dict[str, BoolArray] = {}

    def patched(self, rows: list[int], sets: list[frozenset[str]]) -> _SetColumn:
        """These ids with ``rows`` set to ``sets``: this object itself when none differs (a
        refresh under claims changes usage, rarely traits or aggregates)."""
        index, ids = self.index, self.ids
        if all(index.get(s) == ids[row] for row, s in zip(rows, sets, strict=True)):
            return self
        out = _SetColumn.__new__(_SetColumn)
        out.index, out.ids = dict(self.index), self.ids.copy()
        for row, s in zip(rows, sets, strict=True):
            out.ids[row] = out.index.setdefault(s, len(out.index))
        same = bool((out.ids[rows] == self.ids[rows]).all()) if rows else True
        out.masks = dict(self.masks) if same else {}
        return out

    def mask(self, name: str) -> BoolArray:
        found = self.masks.get(name)
        if found is None:
            table = np.fromiter((name in s for s in self.index), dtype=bool, count=len(self.index))
            if not len(table):
                table = np.zeros(1, dtype=bool)
            found = self.masks[name] = table[self.ids]
        return found


class RootColumns:
    """Columns over the root providers of one state."""

    def __init__(self, state: MirrorState, roots: list[Provider] | None = None) -> None:
        drained(self._fill(state, roots))

    @classmethod
    def built(cls, state: MirrorState) -> Generator[None, None, RootColumns]:
        """New columns over ``state``, a step (a yield) between their parts: at 100,000
        roots each part is a pass over every root."""
        out = cls.__new__(cls)
        yield from out._fill(state, None)
        return out

    def _fill(
        self, state: MirrorState, roots: list[Provider] | None
    ) -> Generator[None, None, None]:
        self.state = state
        self.roots: list[Provider] = (
            roots if roots is not None else [p for p in state.providers.values() if p.is_root]
        )
        yield
        self.row: dict[int, int] = {p.id: i for i, p in enumerate(self.roots)}
        self._classes: dict[str, ClassColumns] = {}
        yield
        self._traits = _SetColumn([p.traits for p in self.roots])
        yield
        self._aggs = _SetColumn([p.aggregates for p in self.roots])

    def follow(self, state: MirrorState) -> RootColumns:
        """These columns for a newer state: only the roots whose value changed are redone
        (a refresh under claims changes a few providers of 100,000); else built anew.

        The class columns are handed over, their usage updated in place (a new 800 kB array
        per class and refresh cost more than the rest of the refresh's patching): this
        object keeps its roots and builds its class columns again if it is asked later."""
        old = self.roots
        moved = state.moved_since(self.state)
        if moved is not None:  # the mirror says which: no pass over every root
            rows = sorted(r for i in moved if (r := self.row.get(i)) is not None)
            roots = list(old)
            for r in rows:
                roots[r] = state.providers[old[r].id]
        else:
            roots = [p for p in state.providers.values() if p.is_root]
            if len(roots) != len(old) or any(a.id != b.id for a, b in zip(roots, old, strict=True)):
                return RootColumns(state, roots)
            rows = [i for i, (a, b) in enumerate(zip(roots, old, strict=True)) if a is not b]
        if len(rows) > len(roots) // 4:
            return RootColumns(state, roots)
        out = RootColumns.__new__(RootColumns)
        out.state, out.roots, out.row = state, roots, self.row
        out._classes = {
            rc: _patched(cols, rc, [(i, roots[i]) for i in rows], old)
            for rc, cols in self._classes.items()
        }
        self._classes = {}  # handed over (see above)
        out._traits = self._traits.patched(rows, [roots[i].traits for i in rows])
        out._aggs = self._aggs.patched(rows, [roots[i].aggregates for i in rows])
        return out

    def __len__(self) -> int:
        return len(self.roots)

    def resource(self, rc: str) -> ClassColumns:
        cols = self._classes.get(rc)
        if cols is None:
            for _ in self.build(rc):
                pass
            cols = self._classes[rc]
        return cols

    def prepare(self, classes: Iterable[str]) -> Generator[None, None, None]:
        """The columns of ``classes`` built, a step (a yield) every ``4 * BUILD_CHUNK``
        rows: the first request over 100,000 roots builds them."""
        for rc in classes:
            if rc not in self._classes:
                yield from self.build(rc)

    def build(self, rc: str) -> Generator[None, None, None]:
        n = len(self.roots)
        cols = ClassColumns(
            np.zeros(n, dtype=bool),
            np.zeros(n, dtype=np.float64),
            np.zeros(n, dtype=np.int64),
            np.zeros(n, dtype=np.int64),
            np.zeros(n, dtype=np.int64),
            np.ones(n, dtype=np.int64),
        )
        chunk = 4 * BUILD_CHUNK
        for i, p in enumerate(self.roots):
            if i % chunk == chunk - 1:
                yield
            _set_row(cols, i, p, rc)
        self._classes.setdefault(rc, cols)  # one built meanwhile by another caller stays

    def trait(self, name: str) -> BoolArray:
        """Roots having trait ``name``."""
        return self._traits.mask(name)

    def aggregate(self, uuid: str) -> BoolArray:
        """Roots in aggregate ``uuid``."""
        return self._aggs.mask(uuid)


def _set_row(cols: ClassColumns, i: int, p: Provider, rc: str) -> None:
    inv = p.inventories.get(rc)
    if inv is None:
        cols.has[i], cols.usable[i], cols.used[i] = False, 0.0, 0
        cols.min_unit[i], cols.max_unit[i], cols.step[i] = 0, 0, 1
        return
    cols.has[i] = True
    cols.usable[i] = inv.limit
    cols.used[i] = p.used.get(rc, 0)
    cols.min_unit[i], cols.max_unit[i], cols.step[i] = inv.min_unit, inv.max_unit, inv.step_size


def _patched(
    cols: ClassColumns, rc: str, rows: list[tuple[int, Provider]], before: list[Provider]
) -> ClassColumns:
    """``cols`` with ``rows`` (row, new provider value) redone; ``before`` the old roots.
    While the rows' inventories of ``rc`` are unchanged (claims move usage only) the usage
    is updated in ``cols`` itself (handed over by :meth:`RootColumns.follow`); else a new
    object."""
    if not rows:
        return cols
    if all(before[i].inventories.get(rc) == p.inventories.get(rc) for i, p in rows):
        used = cols.used
        for i, p in rows:
            if cols.has[i]:
                used[i] = p.used.get(rc, 0)
        return cols
    out = ClassColumns(
        cols.has.copy(),
        cols.usable.copy(),
        cols.used.copy(),
        cols.min_unit.copy(),
        cols.max_unit.copy(),
        cols.step.copy(),
    )
    for i, p in rows:
        _set_row(out, i, p, rc)
    return out
