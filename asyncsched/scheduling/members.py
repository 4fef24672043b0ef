"""Per request: the hosts holding members of its server group, kept as instances are placed.

The server-group filter and weighers ask, for every instance of a multi-create, how many group
members each host holds. Asked host by host that is the whole cloud per instance (1,000
anti-affinity instances at 10,000 hosts: 10 million set intersections). A request instead keeps
one :class:`MemberIndex`: built by one pass over its hosts, then brought up to date from the
hosts touched since (the table's ChangeLog, else one C-level generation compare), so the Python
work per instance is proportional to the touched hosts and the members, not to the cloud.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from operator import attrgetter
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.columns import BoolArray, FloatArray, IntArray
from asyncsched.state.host_state import ChangeLog, HostState

_GEN = attrgetter("generation")


class MemberIndex:
    """Base index -> group members on that host, for the hosts holding at least one.

    ``visited`` counts the hosts looked at one by one (the tests' measure of the work).
    """

    def __init__(self, states: Sequence[HostState]) -> None:
        self._states = states
        self._members: tuple[str, ...] | None = None
        self._set: frozenset[str] = frozenset()
        self._counts: dict[int, int] = {}
        self._pos: dict[int, int] | None = None  # id(state) -> base index (ChangeLog route)
        self._log: tuple[ChangeLog, tuple[int, int]] | None = None
        self._gens: npt.NDArray[np.int64] | None = None
        self.visited = 0

    @property
    def states(self) -> Sequence[HostState]:
        """The request's base host list (base index = position)."""
        return self._states

    def counts(self, members: tuple[str, ...]) -> dict[int, int]:
        """The counts for ``members`` over the hosts as they are now (do not mutate)."""
        old = self._members
        if old is None or not (
            members is old or (len(members) >= len(old) and members[: len(old)] == old)
        ):
            self._rebuild(members)
            return self._counts
        touched = self._touched()
        added = frozenset(members[len(old) :]).difference(self._set)
        self._members = members
        if added:
            self._set = self._set | added
        if touched is None:
            self._rebuild(members)
            return self._counts
        self._recount(touched)
        # a new member was just placed on a touched host; found nowhere among them, it may be
        # anywhere: only a full pass can say
        states = self._states
        if added and not all(any(u in states[i].instances for i in touched) for u in added):
            self._rebuild(members)
        return self._counts

    def _rebuild(self, members: tuple[str, ...]) -> None:
        self._members = members
        self._set = frozenset(members)
        self._counts = {}
        self._mark()
        self._recount(range(len(self._states)))

    def _recount(self, rows: Sequence[int]) -> None:
        states, counts, members = self._states, self._counts, self._set
        disjoint = members.isdisjoint
        self.visited += len(rows)
        for i in rows:
            inst = states[i].instances
            if disjoint(inst):
                counts.pop(i, None)
            else:
                counts[i] = len(members.intersection(inst))

    def _mark(self) -> None:
        states = self._states
        log = states[0].changes if states else None
        if log is not None and all(s.changes is log for s in states):
            self._log = (log, log.mark())
            return
        self._log = None
        self._gens = np.fromiter(map(_GEN, states), dtype=np.int64, count=len(states))

    def _touched(self) -> list[int] | None:
        """Base indices of the hosts changed since the last look (None: cannot say)."""
        if self._log is not None:
            log, mark = self._log
            since = log.since(mark)
            if since is None:
                return None
            self._log = (log, log.mark())
            if self._pos is None:
                self._pos = {id(s): i for i, s in enumerate(self._states)}
            pos = self._pos
            return sorted({p for s in since if (p := pos.get(id(s))) is not None})
        gens = np.fromiter(map(_GEN, self._states), dtype=np.int64, count=len(self._states))
        assert self._gens is not None
        moved: list[int] = np.flatnonzero(gens != self._gens).tolist()
        self._gens = gens
        return moved


def positions(cur: IntArray, bases: Sequence[int]) -> IntArray:
    """Where ``bases`` sit in ``cur`` (sorted base indices), those present only."""
    if not bases:
        return np.empty(0, dtype=np.intp)
    want = np.fromiter(bases, dtype=np.intp, count=len(bases))
    at = np.searchsorted(cur, want)
    inside = at < len(cur)
    at, want = at[inside], want[inside]
    found: IntArray = at[cur[at] == want]
    return found


def mask_without(
    cur: IntArray, failing: Sequence[int], code: str
) -> tuple[BoolArray, Counter[str]]:
    """A filter's mask over ``cur`` failing exactly the base indices ``failing``."""
    mask = np.ones(len(cur), dtype=bool)
    at = positions(cur, failing)
    mask[at] = False
    return mask, Counter({code: len(at)}) if len(at) else Counter()


@runtime_checkable
class MemberFilter(Protocol):
    """A filter that fails only hosts holding group members (answers from the index)."""

    def fails_on_members(
        self, index: MemberIndex, spec: RequestSpec
    ) -> tuple[list[int], str] | None:
        """Base indices failing and their reason code; None to use ``filter_states``."""


@runtime_checkable
class MemberWeigher(Protocol):
    """A weigher whose raw score is zero on every host holding no group member."""

    def weigh_members(self, index: MemberIndex, spec: RequestSpec, cur: IntArray) -> FloatArray:
        """The raw score of each host of ``cur`` (base indices)."""
