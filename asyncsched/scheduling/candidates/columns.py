"""The mirror's root providers as numpy columns, so one request filters 10,000 hosts in a few
vectorised steps instead of a Python loop.

Built once per mirror state (a refresh that changes nothing keeps the state, and with it this
index). Traits and aggregates are interned sets in the mirror, so each root carries the id of
its set and a trait's mask is one lookup per distinct set.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from asyncsched.state.placement_mirror import MirrorState, Provider

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class ClassColumns:
    """Inventory and usage of one resource class over every root (absent: ``has`` False)."""

    has: BoolArray
    usable: npt.NDArray[np.float64]  # (total - reserved) * allocation_ratio
    used: npt.NDArray[np.int64]
    min_unit: npt.NDArray[np.int64]
    max_unit: npt.NDArray[np.int64]
    step: npt.NDArray[np.int64]

    def fits(self, amount: int) -> BoolArray:
        """Placement's capacity clause for ``amount`` on every root at once."""
        ok: BoolArray = (
            self.has
            & (self.used + amount <= self.usable)
            & (self.min_unit <= amount)
            & (self.max_unit >= amount)
            & (amount % self.step == 0)
        )
        return ok


class RootColumns:
    """Columns over the root providers of one state."""

    def __init__(self, state: MirrorState) -> None:
        self.state = state
        self.roots: list[Provider] = [p for p in state.providers.values() if p.is_root]
        self.row: dict[int, int] = {p.id: i for i, p in enumerate(self.roots)}
        self._classes: dict[str, ClassColumns] = {}
        self._trait_ids, self._trait_sets = self._set_ids([p.traits for p in self.roots])
        self._agg_ids, self._agg_sets = self._set_ids([p.aggregates for p in self.roots])
        self._trait_masks: dict[str, BoolArray] = {}
        self._agg_masks: dict[str, BoolArray] = {}

    @staticmethod
    def _set_ids(
        sets: list[frozenset[str]],
    ) -> tuple[npt.NDArray[np.int32], list[frozenset[str]]]:
        index: dict[frozenset[str], int] = {}
        ids = np.fromiter(
            (index.setdefault(s, len(index)) for s in sets), dtype=np.int32, count=len(sets)
        )
        return ids, list(index)

    def __len__(self) -> int:
        return len(self.roots)

    def resource(self, rc: str) -> ClassColumns:
        cols = self._classes.get(rc)
        if cols is None:
            n = len(self.roots)
            has = np.zeros(n, dtype=bool)
            usable = np.zeros(n, dtype=np.float64)
            used = np.zeros(n, dtype=np.int64)
            min_unit = np.zeros(n, dtype=np.int64)
            max_unit = np.zeros(n, dtype=np.int64)
            step = np.ones(n, dtype=np.int64)
            for i, p in enumerate(self.roots):
                inv = p.inventories.get(rc)
                if inv is None:
                    continue
                has[i] = True
                usable[i] = (inv.total - inv.reserved) * inv.allocation_ratio
                used[i] = p.used.get(rc, 0)
                min_unit[i], max_unit[i], step[i] = inv.min_unit, inv.max_unit, inv.step_size
            cols = self._classes[rc] = ClassColumns(has, usable, used, min_unit, max_unit, step)
        return cols

    def trait(self, name: str) -> BoolArray:
        """Roots having trait ``name``."""
        mask = self._trait_masks.get(name)
        if mask is None:
            table = np.fromiter((name in s for s in self._trait_sets), dtype=bool)
            mask = self._trait_masks[name] = table[self._trait_ids]
        return mask

    def aggregate(self, uuid: str) -> BoolArray:
        """Roots in aggregate ``uuid``."""
        mask = self._agg_masks.get(uuid)
        if mask is None:
            table = np.fromiter((uuid in s for s in self._agg_sets), dtype=bool)
            if not len(table):
                table = np.zeros(1, dtype=bool)
            mask = self._agg_masks[uuid] = table[self._agg_ids]
        return mask
