"""Verdicts of state-only filters kept per host while the host does not change.

ImagePropertiesFilter and ComputeCapabilitiesFilter answer from a host's own attributes and a
part of the request (``BaseHostFilter.verdict_key``). At 10,000 hosts a per-host Python call
costs a few milliseconds per filter on every request, although almost no host changes between
two requests. So each (filter, key) keeps one verdict per host row of :class:`HostColumns`
with the row's host generation it was computed at (HostState.touch() moves it on every
change, as the columns themselves rely on); a request then computes only the hosts whose
generation moved and reads the rest in one numpy pass. The hosts judged again are the only
ones a request materialises (``states_at``): at 100,000 hosts a list of every current host
cost 4-5 ms per filter for the one host the last request consumed on.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Generator, Hashable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.columns import BoolArray, HostColumns, IntArray, drained
from asyncsched.scheduling.filters.base import BaseHostFilter
from asyncsched.state.host_state import HostState

#: (filter, key) pairs kept: distinct flavors/images in recent requests, each 2 arrays per host
KEYS = 32
#: hosts judged afresh between two steps of :meth:`VerdictCache.steps` (every host touched by
#: heartbeats at 100,000 hosts: one filter judged them all in ~90 ms, issue #24)
JUDGE_CHUNK = 16384


#: positions in the request's current hosts -> those hosts (in that order)
StatesAt = Callable[[list[int]], Sequence[HostState]]


class _Entry:
    """Per row: the reason code (None: passes), whether it passes, the generation judged."""

    __slots__ = ("codes", "epoch", "gen", "ok")

    def __init__(self, size: int, epoch: int) -> None:
        self.codes: npt.NDArray[Any] = np.full(size, None, dtype=object)
        self.ok: BoolArray = np.zeros(size, dtype=bool)
        self.gen: npt.NDArray[np.int64] = np.full(size, -1, dtype=np.int64)
        self.epoch = epoch

    def grow(self, size: int) -> None:
        if size > len(self.gen):
            extra = size - len(self.gen)
            self.codes = np.concatenate([self.codes, np.full(extra, None, dtype=object)])
            self.ok = np.concatenate([self.ok, np.zeros(extra, dtype=bool)])
            self.gen = np.concatenate([self.gen, np.full(extra, -1, dtype=np.int64)])

    def store(self, rows: IntArray, codes: Sequence[str | None], gens: IntArray) -> None:
        fresh = np.empty(len(codes), dtype=object)
        fresh[:] = codes
        self.codes[rows] = fresh
        self.ok[rows] = np.fromiter((c is None for c in codes), dtype=bool, count=len(codes))
        self.gen[rows] = gens


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
        states_at: StatesAt,
    ) -> tuple[BoolArray, Counter[str]]:
        """``f.filter_states`` over the hosts at ``slots`` (``states_at(positions)`` gives
        the hosts at those positions of ``slots``), computed only where a host changed since
        its verdict for ``key`` was kept."""
        got: tuple[BoolArray, Counter[str]] = drained(self.steps(f, key, spec, slots, states_at))
        return got

    def steps(
        self,
        f: BaseHostFilter,
        key: Hashable,
        spec: RequestSpec,
        slots: IntArray,
        states_at: StatesAt,
    ) -> Generator[None, None, tuple[BoolArray, Counter[str]]]:
        """:meth:`run`, a step (a yield) every ``JUDGE_CHUNK`` hosts judged afresh."""
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
        for i in range(0, len(stale), JUDGE_CHUNK):
            if i:
                yield
            part = stale[i : i + JUDGE_CHUNK]
            at = part.tolist()
            entry.store(slots[part], f.filter_states(states_at(at), spec), gens[part])
            self.computed += len(at)
        mask: BoolArray = entry.ok[slots]
        if mask.all():
            return mask, Counter()
        return mask, Counter(entry.codes[slots[~mask]].tolist())
