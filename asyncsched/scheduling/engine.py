"""The decision path: filter, weigh and pick for one instance, with no I/O.

This is the hot loop of asyncsched. A request builds a :class:`RequestHosts` once (the
candidate HostStates, their Placement allocation candidates and their rows in the shared
:class:`HostColumns`), then for each instance of a multi-create calls :meth:`filter` and
:meth:`pick`. The current host list is a numpy index array into the request's base lists,
so filtering never copies HostState objects. Filters offering a ``column_mask`` and weighers
declaring a ``column`` (built-in or third-party alike) run as numpy expressions over the shared
columns; other state-only plugins run ``filter_states``/``weigh_states`` on the surviving
hosts; plugins that read request-local candidates or limits (NUMA/PCI) get a HostCandidate per
host, nova style.

Semantics are nova's (see reference §1.5, §3, §4), with one documented difference: the host
list carried to the next instance keeps its original order instead of nova's
``[chosen] + weighed`` order, which only matters for hosts tied at the same weight.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import repeat
from operator import is_
from typing import Any

import numpy as np

from asyncsched.common.clock import utcnow
from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, RequestSpec
from asyncsched.scheduling.candidate import HostCandidate
from asyncsched.scheduling.columns import (
    BoolArray,
    ColumnMask,
    ColumnView,
    FloatArray,
    HostColumns,
    IntArray,
)
from asyncsched.scheduling.filters.base import BaseHostFilter
from asyncsched.scheduling.members import MemberFilter, MemberIndex, MemberWeigher, mask_without
from asyncsched.scheduling.verdicts import VerdictCache
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.state.host_state import HostState

Reasons = dict[str, Counter[str]]

#: shared and never mutated: a host's list is copied before a plugin may prune it.
_NO_CANDIDATES: list[dict[str, Any]] = []
#: a filter step over at least this many hosts is followed by a turn given to the event loop
#: (:meth:`RequestHosts.filter_async`): at 100,000 hosts a step judging every host afresh
#: (all touched by heartbeats) takes tens of ms, the steps together over 100 ms (issue #24)
FILTER_YIELD_HOSTS = 16384


@dataclass(slots=True)
class _FilterStep:
    plugin: BaseHostFilter
    fast: ColumnMask | None
    state_only: bool
    members: bool = False  # answers from the request's MemberIndex (server groups)


@dataclass(slots=True)
class RequestHosts:
    """One request's hosts: base lists plus the current (cumulative) selection ``cur``."""

    engine: DecisionEngine
    states: Sequence[HostState]  # the caller's list, read-only (shared with later requests)
    cands: Sequence[list[dict[str, Any]]]  # the caller's until a plugin prunes (then a copy)
    slots: IntArray
    cur: IntArray
    limits: dict[int, dict[str, Any]] = field(default_factory=dict)
    reasons: Reasons = field(default_factory=dict)
    initial: int = 0
    weights: FloatArray | None = None
    emptied_by: str | None = None  # the filter or host rule that left no host (metrics)
    _members: MemberIndex | None = None  # built on first use by a server-group plugin
    _own_cands: bool = False  # cands is this request's own copy
    _current: tuple[IntArray, list[HostState]] | None = None  # current_states() of that cur

    def set_cands(self, i: int, cands: list[dict[str, Any]]) -> None:
        """Host ``i``'s allocation requests as a plugin pruned them (this request only)."""
        if not self._own_cands:
            self.cands = list(self.cands)  # copied once, on the first prune
            self._own_cands = True
        assert isinstance(self.cands, list)
        self.cands[i] = cands

    # -- filtering -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.cur)

    def current_states(self) -> Sequence[HostState]:
        """The hosts left, in order (read-only: the base list itself while none is gone)."""
        states, cur = self.states, self.cur
        if len(cur) == len(states):  # cur only ever narrows arange(n): nothing gone
            return states
        kept = self._current
        if kept is None or kept[0] is not cur:  # cur is a new array whenever it narrows
            kept = self._current = (cur, [states[i] for i in cur.tolist()])
        return kept[1]

    def states_at(self, positions: list[int]) -> list[HostState]:
        """The current hosts at these positions of ``cur`` (a few, not every host)."""
        states = self.states
        return [states[i] for i in self.cur[positions].tolist()]

    def member_index(self) -> MemberIndex:
        """The hosts holding members of the request's server group (see members.py)."""
        if self._members is None:
            self._members = MemberIndex(self.states)
        return self._members

    def _keep(self, mask: BoolArray, by: str) -> None:
        self.cur = self.cur[mask]
        if not len(self.cur):
            self.emptied_by = by

    def _count(self, name: str, reasons: Counter[str]) -> None:
        reasons = +reasons  # drop zero counts
        if reasons:
            self.reasons.setdefault(name, Counter()).update(reasons)

    def apply_host_rules(self, spec: RequestSpec) -> bool:
        """requested_destination / ignore_hosts / force_hosts / force_nodes (nova's order).

        Returns True when filters must be skipped (forcing without ``_nova_check_type``).
        """
        states = self.states
        dest = spec.requested_destination
        if dest is not None and dest.host is not None:
            want_host, want_node = dest.host, dest.node
            mask = np.fromiter(
                (
                    states[i].host == want_host
                    and (not want_node or states[i].nodename == want_node)
                    for i in self.cur.tolist()
                ),
                dtype=bool,
                count=len(self.cur),
            )
            self._count("requested_destination", Counter({"not-requested": int((~mask).sum())}))
            self._keep(mask, "requested_destination")
        ignore = [h.lower() for h in spec.ignore_hosts or ()]
        force_hosts = [h.lower() for h in spec.force_hosts or ()]
        force_nodes = set(spec.force_nodes or ())
        if not (ignore or force_hosts or force_nodes):
            return False
        if ignore:
            mask = np.fromiter(
                (states[i].host.lower() not in ignore for i in self.cur.tolist()),
                dtype=bool,
                count=len(self.cur),
            )
            self._count("ignore_hosts", Counter({"ignored": int((~mask).sum())}))
            self._keep(mask, "ignore_hosts")
            if not len(self.cur):
                return True
        if force_hosts:
            mask = np.fromiter(
                (states[i].host.lower() in force_hosts for i in self.cur.tolist()),
                dtype=bool,
                count=len(self.cur),
            )
            self._count("force_hosts", Counter({"not-forced": int((~mask).sum())}))
            self._keep(mask, "force_hosts")
        if force_nodes:
            mask = np.fromiter(
                (states[i].nodename in force_nodes for i in self.cur.tolist()),
                dtype=bool,
                count=len(self.cur),
            )
            self._count("force_nodes", Counter({"not-forced": int((~mask).sum())}))
            self._keep(mask, "force_nodes")
        check_type = spec.scheduler_hints.get("_nova_check_type")
        return bool(not check_type and (force_hosts or force_nodes))

    def filter(self, spec: RequestSpec, index: int) -> int:
        """Run the enabled filters for instance ``index``; returns the hosts left."""
        for _ in self._filter_steps(spec, index):
            pass
        return len(self.cur)

    async def filter_async(self, spec: RequestSpec, index: int) -> int:
        """As :meth:`filter`, a turn given to the event loop after each step over
        ``FILTER_YIELD_HOSTS`` hosts or more."""
        for _ in self._filter_steps(spec, index):
            await asyncio.sleep(0)
        return len(self.cur)

    def _filter_steps(self, spec: RequestSpec, index: int) -> Generator[None, None, None]:
        """The filters of :meth:`filter`, yielding after each one run over many hosts."""
        engine = self.engine
        rebuild = spec.is_rebuild
        for step in engine.steps:
            if not len(self.cur):
                break
            f = step.plugin
            if index > 0 and f.run_filter_once_per_request:
                continue
            if rebuild and not f.RUN_ON_REBUILD:
                continue
            if not f.is_active(spec):
                continue
            sparse = self._filter_members(f, spec) if step.members else None
            if sparse is not None:
                mask, reasons = sparse
            elif step.fast is not None:
                view = ColumnView(engine.columns, self.slots[self.cur])
                mask, reasons = step.fast.run(view, engine.clock())
            elif step.state_only:
                key = f.verdict_key(spec)
                if key is not None:
                    slots = self.slots[self.cur]
                    steps = engine.verdicts.steps(f, key, spec, slots, self.states_at)
                    mask, reasons = yield from steps
                else:
                    codes = f.filter_states(self.current_states(), spec)
                    mask = np.fromiter(map(is_, codes, repeat(None)), dtype=bool, count=len(codes))
                    reasons = (
                        Counter(c for c in codes if c is not None) if not mask.all() else Counter()
                    )
            else:
                mask, reasons = self._filter_candidates(f, spec)
            self._count(f.name, reasons)
            self._keep(mask, f.name)
            if len(mask) >= FILTER_YIELD_HOSTS:
                yield

    def _filter_members(
        self, f: BaseHostFilter, spec: RequestSpec
    ) -> tuple[BoolArray, Counter[str]] | None:
        assert isinstance(f, MemberFilter)
        got = f.fails_on_members(self.member_index(), spec)
        return None if got is None else mask_without(self.cur, *got)

    def _filter_candidates(
        self, f: BaseHostFilter, spec: RequestSpec
    ) -> tuple[BoolArray, Counter[str]]:
        """nova-style per-host call for plugins that read or prune request-local data."""
        out = np.zeros(len(self.cur), dtype=bool)
        reasons: Counter[str] = Counter()
        for pos, i in enumerate(self.cur.tolist()):
            hc = HostCandidate(self.states[i], list(self.cands[i]), dict(self.limits.get(i, {})))
            code = f.host_passes(hc, spec)
            if code is None:
                out[pos] = True
                self.set_cands(i, hc.allocation_candidates)
                if hc.limits:
                    self.limits[i] = hc.limits
            else:
                reasons[code] += 1
        return out, reasons

    # -- weighing and picking --------------------------------------------------------------

    def weigh(self, spec: RequestSpec) -> FloatArray:
        """nova's combined weight of every current host (min/max normalised, multiplied)."""
        total = np.zeros(len(self.cur))
        for _, term in self.weigh_terms(spec):
            total += term
        return total

    def weigh_terms(self, spec: RequestSpec) -> Iterator[tuple[BaseHostWeigher, FloatArray]]:
        """Each active weigher's contribution (multiplier x normalised score) per current
        host; ``weigh`` sums them, an explain shows them one by one."""
        engine = self.engine
        if len(self.cur) <= 1:
            return
        slots = self.slots[self.cur]
        for w in engine.weighers:
            if not w.is_active(spec):
                continue
            per_host = w.aggregate_key is not None and w.aggregate_key in engine.aggregate_keys
            if not per_host and w.config_multiplier() == 0.0:
                continue
            raw = self._raw(w, spec, slots)
            if w.minval is not None:
                np.maximum(raw, w.minval, out=raw)
            if w.maxval is not None:
                np.minimum(raw, w.maxval, out=raw)
            lo = float(w.minval) if w.minval is not None else float(raw.min())
            hi = float(w.maxval) if w.maxval is not None else float(raw.max())
            if lo == hi:
                continue
            # nova's multiplier * (raw - lo) / (hi - lo), the same operations in raw's memory
            # (this request's copy): at 100,000 hosts three fewer arrays per weigher
            np.subtract(raw, lo, out=raw)
            np.divide(raw, hi - lo, out=raw)
            if per_host:
                assert w.aggregate_key is not None
                np.multiply(self._multipliers(w, w.aggregate_key), raw, out=raw)
            else:
                np.multiply(w.config_multiplier(), raw, out=raw)
            yield w, raw

    def _raw(self, w: BaseHostWeigher, spec: RequestSpec, slots: IntArray) -> FloatArray:
        """The weigher's raw score per current host, as a new array this request owns."""
        engine = self.engine
        column = w.column
        if column is not None:
            got: FloatArray = engine.columns.num[column.name][slots]  # fancy index: a copy
            return got
        mw = engine.member_weighers.get(id(w))
        if mw is not None:
            return np.array(mw.weigh_members(self.member_index(), spec, self.cur), np.float64)
        return np.array(w.weigh_states(self.current_states(), spec), dtype=np.float64)

    def _multipliers(self, w: BaseHostWeigher, key: str) -> FloatArray:
        """Per-host multipliers: config value, except hosts in an aggregate carrying ``key``."""
        engine = self.engine
        if type(w).multiplier is BaseHostWeigher.multiplier:
            vals = engine.aggregate_values(key)[self.slots[self.cur]]
            if w.aggregate_sign != 1.0:
                vals = w.aggregate_sign * vals
            return np.where(np.isnan(vals), w.config_multiplier(), vals)
        states = self.current_states()
        return np.fromiter((w.multiplier(s) for s in states), dtype=np.float64, count=len(states))

    def pick(self, spec: RequestSpec) -> Ordering:
        """Weigh and choose (host_subset_size, shuffle_best_same_weighed_hosts)."""
        weights = self.weigh(spec)
        self.weights = weights
        fs = self.engine.config.filter_scheduler
        subset, shuffle = fs.host_subset_size, fs.shuffle_best_same_weighed_hosts
        n = len(self.cur)
        if subset <= 1 and not shuffle:
            return Ordering(self, weights, int(np.argmax(weights)), None)
        order = np.argsort(-weights, kind="stable").tolist()
        if shuffle:
            best = weights[order[0]]
            ties = [p for p in order if weights[p] == best]
            self.engine.rng.shuffle(ties)
            order = ties + order[len(ties) :]
        chosen = self.engine.rng.choice(order[: min(subset, n)])
        return Ordering(self, weights, chosen, order)


@dataclass(slots=True)
class Ordering:
    """The pick: ``chosen`` first, then the rest in weighed order (computed on demand)."""

    hosts: RequestHosts
    weights: FloatArray
    chosen: int  # position in hosts.cur at pick time
    _order: list[int] | None
    cur: IntArray = field(init=False)

    def __post_init__(self) -> None:
        self.cur = self.hosts.cur

    @property
    def chosen_index(self) -> int:
        """Index into the request's base lists."""
        return int(self.cur[self.chosen])

    def indices(self) -> Iterable[int]:
        """Base indices: chosen, then the others by descending weight (stable); may be
        iterated again. Without a precomputed order, sorted a prefix at a time: a request
        mostly takes its first host and a few alternates out of thousands."""
        order = self._order
        if order is None:
            return WeighedOrder(self.cur, self.weights, self.chosen)
        cur = self.cur.tolist()
        return [cur[self.chosen]] + [cur[p] for p in order if p != self.chosen]


class WeighedOrder:
    """:meth:`Ordering.indices` for a pick without a precomputed order, sorted only as far
    as it is iterated: the first ``FIRST`` positions one ``argmin`` each (a request mostly
    takes its host and a few alternates: at 100,000 hosts a few 0.05 ms passes against a
    1-2 ms partition); then the head (every position weighing at least the ``HEAD``-th best,
    ties included), exactly the start of the stable descending argsort; the rest is sorted
    only if iteration goes past it."""

    FIRST = 8
    HEAD = 64

    def __init__(self, cur: IntArray, weights: FloatArray, chosen: int) -> None:
        self._cur = cur.copy()  # the pick's view, whatever the request does next
        self._neg = -weights  # a new array
        self._chosen = chosen
        self._first: list[int] = []
        self._scan: FloatArray | None = None  # _neg with the positions found set to +inf
        self._exact = True  # False once a NaN or infinity makes argmin's order unsafe
        self._head: list[int] | None = None
        self._full: list[int] | None = None

    def _find_first(self) -> int | None:
        """The next position of the stable order by one argmin (the first of the least
        values left, as the stable sort has it), or None past FIRST or on a non-finite."""
        n = len(self._first)
        if n >= self.FIRST or n >= len(self._neg) or not self._exact:
            return None
        if self._scan is None:
            self._scan = self._neg.copy()
        p = int(np.argmin(self._scan))  # the first NaN if any: not finite, stop
        if not np.isfinite(self._scan[p]):
            self._exact = False
            return None
        self._scan[p] = np.inf
        self._first.append(p)
        return p

    def _positions(self, head: bool) -> list[int]:
        neg = self._neg
        if not head or len(neg) <= 2 * self.HEAD:
            if self._full is None:
                self._full = np.argsort(neg, kind="stable").tolist()
            return self._full
        if self._head is None:
            kth = np.partition(neg, self.HEAD - 1)[self.HEAD - 1]
            sel = np.flatnonzero(neg <= kth)
            self._head = sel[np.argsort(neg[sel], kind="stable")].tolist()
        return self._head

    def _stable(self) -> Iterator[int]:
        """Every position, in the stable descending order of the weights."""
        given = 0
        while True:
            p = self._first[given] if given < len(self._first) else self._find_first()
            if p is None:
                break
            given += 1
            yield p
        n = len(self._neg)
        if given >= n:
            return
        head = self._positions(head=True)
        yield from head[given:]
        if len(head) < n:
            yield from self._positions(head=False)[max(len(head), given) :]

    def __iter__(self) -> Iterator[int]:
        cur, chosen = self._cur, self._chosen
        yield int(cur[chosen])
        for p in self._stable():
            if p != chosen:
                yield int(cur[p])


class DecisionEngine:
    """Filter/weigher instances plus the shared columns; rebuilt on SIGHUP."""

    def __init__(
        self,
        config: Config,
        filters: Sequence[BaseHostFilter],
        weighers: Sequence[BaseHostWeigher],
        *,
        columns: HostColumns | None = None,
        clock: Callable[[], datetime] = utcnow,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.filters = list(filters)
        self.weighers = list(weighers)
        self.columns = columns if columns is not None else HostColumns()
        self.verdicts = VerdictCache(self.columns)  # per engine: SIGHUP starts afresh
        self.clock = clock
        self.rng = rng if rng is not None else random.Random()
        self.aggregate_keys: frozenset[str] = frozenset()
        self._aggregates: list[Aggregate] | None = None
        self._agg_values: dict[str, dict[str, float]] = {}
        self._agg_columns: dict[str, tuple[int, FloatArray]] = {}  # key -> (rows' epoch, values)
        self.steps: list[_FilterStep] = []
        for f in self.filters:
            fast = f.column_mask()
            if fast is not None:
                self.columns.register(fast.columns)
            sparse = isinstance(f, MemberFilter)
            self.steps.append(_FilterStep(f, fast, type(f).is_state_only(), sparse))
        self.columns.register(w.column for w in self.weighers if w.column is not None)
        self.member_weighers: dict[int, MemberWeigher] = {
            id(w): w for w in self.weighers if isinstance(w, MemberWeigher)
        }

    def set_aggregates(self, aggregates: Iterable[Aggregate]) -> None:
        """Index aggregate metadata keys -> member hosts (per-aggregate weigher multipliers).

        Called on every request: the same aggregate objects cost a compare by identity; new
        objects of the same value (the cache's full re-read makes them) a compare of every
        member once, then those objects are kept; a change rebuilds the index.
        """
        aggs = list(aggregates)
        if aggs == self._aggregates:
            self._aggregates = aggs  # the same values: compare these objects by identity next
            return
        self._aggregates = aggs
        raw: dict[str, dict[str, set[str]]] = {}
        for agg in aggs:
            for key, value in agg.metadata.items():
                per_host = raw.setdefault(key, {})
                for host in agg.hosts:
                    per_host.setdefault(host, set()).add(value)
        values: dict[str, dict[str, float]] = {}
        for key, per_host in raw.items():
            out: dict[str, float] = {}
            for host, vals in per_host.items():
                try:
                    out[host] = min(float(v) for v in vals)
                except ValueError:
                    out[host] = float("nan")  # nova: warn and use the config value
            values[key] = out
        self._agg_values = values
        self._agg_columns = {}
        self.aggregate_keys = frozenset(raw)

    def aggregate_values(self, key: str) -> FloatArray:
        """Per column row: the minimum aggregate value of ``key`` (NaN = use config)."""
        cols = self.columns
        kept = self._agg_columns.get(key)
        # rows added since (longer now) or renumbered (forget_missing moves the epoch)
        if kept is not None and kept[0] == cols.epoch and len(kept[1]) >= len(cols):
            return kept[1]
        values = self._agg_values.get(key, {})
        nan = float("nan")
        arr = np.fromiter(
            (values.get(s.host, nan) for s in cols.states), dtype=np.float64, count=len(cols)
        )
        self._agg_columns[key] = (cols.epoch, arr)
        return arr

    def start(
        self, states: Sequence[HostState], cands: Sequence[list[dict[str, Any]]] | None = None
    ) -> RequestHosts:
        """Begin a request over ``states`` (cands[i] = allocation requests of states[i]).

        Both lists are the caller's, not copied (at 100,000 hosts two copies and their
        release cost more than the rest of a request's start): the caller must not change
        them while the request runs; the request changes ``cands`` only on a copy."""
        return self._hosts(states, cands, self.columns.slots(states))

    async def start_async(
        self, states: Sequence[HostState], cands: Sequence[list[dict[str, Any]]] | None = None
    ) -> RequestHosts:
        """As :meth:`start`, the stale rows of 100,000 hosts written with turns given to
        the event loop (issue #24)."""
        return self._hosts(states, cands, await self.columns.slots_async(states))

    def _hosts(
        self,
        states: Sequence[HostState],
        cands: Sequence[list[dict[str, Any]]] | None,
        slots: IntArray,
    ) -> RequestHosts:
        # slots: for the caller's list (a kept view's rows are kept)
        n = len(states)
        return RequestHosts(
            engine=self,
            states=states,
            cands=cands if cands is not None else [_NO_CANDIDATES] * n,
            slots=slots,
            cur=np.arange(n, dtype=np.intp),
            initial=n,
        )

    def refresh(self, state: HostState) -> None:
        self.columns.refresh(state)
