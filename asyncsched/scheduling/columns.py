"""Columnar numeric view of HostStates for the vectorised filters and weighers.

Rows are keyed by the HostState object (we keep a reference, so ``id`` stays unique) and
rebuilt only when the host's ``generation`` moved. A request costs two C-level passes over its
hosts (slot lookup, generation read) instead of a Python loop per filter and weigher.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from operator import attrgetter

import numpy as np
import numpy.typing as npt

from asyncsched.state.host_state import HostState

_GEN = attrgetter("generation")

#: numeric columns (float64); names are what the fast filters/weighers read.
COLUMNS = (
    "free_ram_mb",
    "cpu_free",
    "free_disk_mb",
    "num_io_ops",
    "num_instances",
    "failed_builds",
    "hypervisor_version",
    "pci_score",
    "beat",  # last_seen_up or created_at as a UTC timestamp; NaN if none
)
_FLAGS = ("no_service", "disabled", "forced_down")

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]


def _ts(value: datetime | None) -> float:
    if value is None:
        return float("nan")
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


class HostColumns:
    """One growing set of numpy columns shared by every request of a scheduler."""

    def __init__(self, capacity: int = 1024) -> None:
        self._slot: dict[int, int] = {}
        self._states: list[HostState] = []
        self.gen: npt.NDArray[np.int64] = np.full(capacity, -1, dtype=np.int64)
        self.num: dict[str, FloatArray] = {c: np.zeros(capacity) for c in COLUMNS}
        self.flag: dict[str, BoolArray] = {f: np.zeros(capacity, dtype=bool) for f in _FLAGS}

    def __len__(self) -> int:
        return len(self._states)

    @property
    def states(self) -> list[HostState]:
        """The HostState of each row (row number = index)."""
        return self._states

    def _grow(self, need: int) -> None:
        cap = len(self.gen)
        if need <= cap:
            return
        new = max(need, cap * 2)
        self.gen = np.concatenate([self.gen, np.full(new - cap, -1, dtype=np.int64)])
        for c in COLUMNS:
            self.num[c] = np.concatenate([self.num[c], np.zeros(new - cap)])
        for f in _FLAGS:
            self.flag[f] = np.concatenate([self.flag[f], np.zeros(new - cap, dtype=bool)])

    def _write(self, slot: int, s: HostState) -> None:
        num = self.num
        num["free_ram_mb"][slot] = s.free_ram_mb
        num["cpu_free"][slot] = s.vcpus_total * s.cpu_allocation_ratio - s.vcpus_used
        num["free_disk_mb"][slot] = s.free_disk_mb
        num["num_io_ops"][slot] = s.num_io_ops
        num["num_instances"][slot] = s.num_instances
        num["failed_builds"][slot] = s.failed_builds
        num["hypervisor_version"][slot] = s.hypervisor_version or 0
        free = sum(p.count for p in s.pci_pools) if s.pci_pools else 0
        num["pci_score"][slot] = 100 - min(free, 99)
        svc = s.service
        self.flag["no_service"][slot] = svc is None
        self.flag["disabled"][slot] = bool(svc is not None and svc.disabled)
        self.flag["forced_down"][slot] = bool(svc is not None and svc.forced_down)
        num["beat"][slot] = (
            _ts(svc.last_seen_up or svc.created_at) if svc is not None else float("nan")
        )
        self.gen[slot] = s.generation

    def slots(self, states: Sequence[HostState]) -> IntArray:
        """Row numbers of ``states`` with every stale row rebuilt."""
        n = len(states)
        got = list(map(self._slot.get, map(id, states)))
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
                    got[i] = slot
        idx = np.fromiter(got, dtype=np.intp, count=n)  # type: ignore[arg-type]
        gens = np.fromiter(map(_GEN, states), dtype=np.int64, count=n)
        stale = np.flatnonzero(self.gen[idx] != gens)
        for i in stale.tolist():
            self._write(int(idx[i]), states[i])
        return idx

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
        fresh = HostColumns(max(1024, len(states)))
        fresh.slots(states)
        self._slot, self._states = fresh._slot, fresh._states
        self.gen, self.num, self.flag = fresh.gen, fresh.num, fresh.flag
