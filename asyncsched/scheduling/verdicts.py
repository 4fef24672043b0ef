"""Verdicts of state-only filters kept per host while the host does not change.

ImagePropertiesFilter and ComputeCapabilitiesFilter answer from a host's own attributes and a
part of the request (``BaseHostFilter.verdict_key``). At 10,000 hosts a per-host Python call
costs a few milliseconds per filter on every request, although almost no host changes between
two requests. So each (filter, key) keeps one verdict per host row of :class:`HostColumns`
with the row's host generation it was computed at (HostState.touch() moves it on every
change, as the columns themselves rely on); a request then computes only the hosts whose
generation moved and reads the rest in one numpy pass.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.columns import BoolArray, HostColumns, IntArray
from asyncsched.scheduling.filters.base import BaseHostFilter
from asyncsched.state.host_state import HostState

#: (filter, key) pairs kept: distinct flavors/images in recent requests, each 2 arrays per host
KEYS = 32


class _Entry:
    __slots__ = ("codes", "epoch", "gen")

    def __init__(self, size: int, epoch: int) -> None:
        self.codes: npt.NDArray[Any] = np.full(size, None, dtype=object)
        self.gen: npt.NDArray[np.int64] = np.full(size, -1, dtype=np.int64)
        self.epoch = epoch

    def grow(self, size: int) -> None:
        if size > len(self.gen):
            extra = size - len(self.gen)
            self.codes = np.concatenate([self.codes, np.full(extra, None, dtype=object)])
            self.gen = np.concatenate([self.gen, np.full(extra, -1, dtype=np.int64)])


class VerdictCache:
    """Per (filter name, request key): a reason code (or None) per column row."""

    def __init__(self, columns: HostColumns, keys: int = KEYS) -> None:
        self._columns = columns
        self._keys = keys
        self._entries: OrderedDict[tuple[str, Hashable], _Entry] = OrderedDict()
        self.computed = 0  # host verdicts computed (the rest were reused)

    def run(
        self,
        f: BaseHostFilter,
        key: Hashable,
        spec: RequestSpec,
        slots: IntArray,
        states: Callable[[], Sequence[HostState]],
    ) -> tuple[BoolArray, Counter[str]]:
        """``f.filter_states`` over the hosts at ``slots`` (``states()`` in the same order),
        computed only where a host changed since its verdict for ``key`` was kept."""
        cols = self._columns
        size = max(len(cols.gen), int(slots.max()) + 1 if len(slots) else 0)
        entry = self._entries.get((f.name, key))
        if entry is None or entry.epoch != cols.epoch:
            entry = _Entry(size, cols.epoch)
            self._entries[(f.name, key)] = entry
            if len(self._entries) > self._keys:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end((f.name, key))
            entry.grow(size)
        # The generations the request's start() brought the rows to (HostColumns.slots): a
        # host changed since then is judged as it was then, or afresh and kept as of then
        # (judged again on the next request); never a verdict for content it did not have.
        gens = cols.gen[slots]
        stale = np.flatnonzero(entry.gen[slots] != gens)
        if len(stale):
            hosts = states()
            at = stale.tolist()
            codes = f.filter_states([hosts[i] for i in at], spec)
            rows = slots[stale]
            fresh = np.empty(len(codes), dtype=object)
            fresh[:] = codes
            entry.codes[rows] = fresh
            entry.gen[rows] = gens[stale]
            self.computed += len(at)
        got = entry.codes[slots]
        mask: BoolArray = np.asarray(got == None, dtype=bool)  # noqa: E711 (elementwise)
        if mask.all():
            return mask, Counter()
        return mask, Counter(got[~mask].tolist())
