"""A dry run of select_destinations: the real decision path on scratch copies, nothing claimed.

``dry_run`` runs a :class:`DryRunManager`, a :class:`SchedulerManager` whose

* cache hands out the real HostStates for reading, while its engine (:class:`ScratchEngine`)
  starts every request over *copies* of them, in columns of its own, so the consumption of
  one instance (scalars, NUMA, PCI) lands on a copy and the next instance sees it, but the
  live cache, its assumptions and the live engine's columns never do;
* Placement is the real client for ``GET /allocation_candidates`` and a stand-in for claims
  (:class:`NoClaims`): a claim is never sent, it is judged on the capacity and usage Placement
  returned with the candidates, so the claim path (candidates per host, a refused claim
  re-placed, alternates, rollback) runs as for a real call;
* random generator and diagnostics are its own, so a dry run does not move the live ones.

:class:`TracedHosts` keeps what the first instance went through (reasons, survivors, each
weigher's contribution) for ``scheduling.explain``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import uuid as uuidlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from operator import attrgetter
from typing import Any

from asyncsched.conf.options import Config
from asyncsched.exceptions import NoValidHost, PlacementError
from asyncsched.objects.models import Aggregate, CellMapping, RequestContext, RequestSpec, Selection
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.query import ResourceRequest
from asyncsched.scheduling.diagnostics import Diagnostics, RequestSummary
from asyncsched.scheduling.engine import DecisionEngine, Ordering, RequestHosts
from asyncsched.scheduling.interfaces import HostCache, Placement
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.state import assumptions
from asyncsched.state.host_state import HostState, PlacedNumaPci

#: the reason-count names apply_host_rules uses, in the order it applies them
HOST_RULES = ("requested_destination", "ignore_hosts", "force_hosts", "force_nodes")
#: hosts copied between two yields to the event loop (about 5 ms of work)
PREPARE_CHUNK = 500


_FIELDS = tuple(f.name for f in dataclasses.fields(HostState))
_VALUES = attrgetter(*_FIELDS)
_LOCK, _INSTANCES, _ASSUMED = (_FIELDS.index(n) for n in ("lock", "instances", "assumed"))


def scratch_copy(state: HostState) -> HostState:
    """A HostState that may be consumed without touching ``state`` (own lock, sets, dicts).

    Frozen values (NUMA topology, PCI pools, services, aggregates) are shared: consumption
    replaces them, it never mutates them. (Positional construction: a quarter of the cost
    of ``dataclasses.replace``, which counts at 10,000 hosts.)
    """
    values = list(_VALUES(state))
    values[_LOCK] = asyncio.Lock()
    values[_INSTANCES] = set(state.instances)
    values[_ASSUMED] = dict(state.assumed)
    return HostState(*values)


class ScratchCache:
    """The live cache for reading; consumption goes to the (scratch) host it is given.

    ``keep=False`` (capacity: 100,000 instances, never released) applies the arithmetic
    without keeping an Assumption per instance: fewer live objects, fewer full GC passes.
    """

    def __init__(self, cache: HostCache, *, keep: bool = True) -> None:
        self._cache = cache
        self._keep = keep
        self.metrics: Counter[str] = Counter()  # the live cache's counters stay untouched

    @property
    def hosts_epoch(self) -> int:
        return self._cache.hosts_epoch

    def get_by_uuids(self, uuids: Iterable[str]) -> list[HostState]:
        return self._cache.get_by_uuids(uuids)

    def get_by_host_node(self, host: str, node: str | None = None) -> list[HostState]:
        return self._cache.get_by_host_node(host, node)

    def all_hosts(self) -> list[HostState]:
        return self._cache.all_hosts()

    def cells(self) -> list[CellMapping]:
        return self._cache.cells()

    def aggregates(self) -> list[Aggregate]:
        return self._cache.aggregates()

    async def fresh_services(self) -> None:
        await self._cache.fresh_services()

    async def begin_fresh_services(self) -> Awaitable[None]:
        return await self._cache.begin_fresh_services()

    def consume_locked(
        self,
        host: HostState,
        spec: RequestSpec,
        instance_uuid: str,
        *,
        placed: PlacedNumaPci | None = None,
    ) -> None:
        """The cache's consume (``state.assumptions``) on a scratch copy, which has no DB
        snapshot to rebase on."""
        assumptions.consume(
            host,
            spec,
            instance_uuid,
            placed=placed,
            now=0.0,
            rebase_host=_no_snapshot,
            metrics=self.metrics,
        )
        if not self._keep:
            del host.assumed[instance_uuid]

    async def release(self, host: HostState, instance_uuid: str) -> None:
        assumptions.release(host, (instance_uuid,), rebase_host=_no_snapshot, metrics=self.metrics)

    async def release_many(self, consumed: Iterable[tuple[HostState, str]]) -> None:
        for host, instance_uuid in consumed:
            await self.release(host, instance_uuid)


def _no_snapshot(host: HostState) -> bool:
    return False


class NoClaims:
    """Placement for a dry run: real candidate queries; claims judged, recorded, never sent.

    A claim is judged as Placement would judge it on the numbers it gave with the candidates
    (each provider's capacity and usage in ``provider_summaries``) plus the claims this dry
    run already made, so a multi-create that would overrun a provider fails here too.
    """

    def __init__(self, placement: Placement, *, keep: bool = True) -> None:
        self._placement = placement
        self._keep = keep  # False: claims are judged and counted, not kept
        self.claims: dict[str, Mapping[str, Any]] = {}
        self._free: dict[tuple[str, str], int] = {}
        # id(allocation request) -> (it, its wants): Placement's dicts are read-only and
        # kept alive here, so an id is not reused while cached
        self._wants: dict[int, tuple[Mapping[str, Any], list[tuple[tuple[str, str], int]]]] = {}

    def _wants_of(self, allocation_request: Mapping[str, Any]) -> list[tuple[tuple[str, str], int]]:
        got = self._wants.get(id(allocation_request))
        if got is None:
            got = (allocation_request, _wants(allocation_request))
            self._wants[id(allocation_request)] = got
        return got[1]

    async def get_allocation_candidates(self, request: ResourceRequest) -> Candidates:
        cands = await self._placement.get_allocation_candidates(request)
        for rp, summary in cands.provider_summaries.items():
            for rc, inv in (summary.get("resources") or {}).items():
                free = int(inv.get("capacity", 0)) - int(inv.get("used", 0))
                self._free.setdefault((rp, rc), free)
        return cands

    async def claim(
        self,
        consumer_uuid: str,
        allocation_request: Mapping[str, Any],
        *,
        project_id: str,
        user_id: str,
        allocation_request_version: str = "",
        may_have_allocations: bool = False,
    ) -> bool:
        if self.short_of(allocation_request) is not None:
            return False
        free = self._free
        for key, n in self._wants_of(allocation_request):
            if key in free:
                free[key] -= n
        if self._keep:
            self.claims[consumer_uuid] = allocation_request
        return True

    def short_of(self, allocation_request: Mapping[str, Any]) -> str | None:
        """The first resource class a claim of ``allocation_request`` finds no room for."""
        free = self._free
        for key, n in self._wants_of(allocation_request):
            if key in free and free[key] < n:
                return key[1]
        return None

    async def rollback(self, consumer_uuids: Iterable[str]) -> None:
        for u in consumer_uuids:
            claimed = self.claims.pop(u, None)
            if claimed is None:
                continue
            for key, n in _wants(claimed):
                if key in self._free:
                    self._free[key] += n


def _wants(allocation_request: Mapping[str, Any]) -> list[tuple[tuple[str, str], int]]:
    """((provider, resource class), amount) of one allocation request."""
    return [
        ((rp, rc), int(n))
        for rp, alloc in allocation_request["allocations"].items()
        for rc, n in alloc.get("resources", {}).items()
    ]


@dataclasses.dataclass(frozen=True, slots=True)
class FirstInstance:
    """What the first instance went through: filters, then the weighed survivors."""

    spec: RequestSpec  # after the pre-filters, as the filters saw it
    reasons: dict[str, dict[str, int]]  # name -> reason code -> hosts dropped (rules too)
    survivors: tuple[int, ...]  # base indices left after filtering
    terms: tuple[tuple[str, tuple[float, ...]], ...] = ()  # weigher -> share per survivor
    weights: tuple[float, ...] = ()  # total weight per survivor


@dataclasses.dataclass(slots=True)
class TracedHosts(RequestHosts):
    """RequestHosts that remember the first instance's filtering and weighing."""

    first: FirstInstance | None = None
    skipped_filters: bool = False
    weighed: bool = False

    def apply_host_rules(self, spec: RequestSpec) -> bool:
        self.skipped_filters = RequestHosts.apply_host_rules(self, spec)
        return self.skipped_filters

    def filter(self, spec: RequestSpec, index: int) -> int:
        left = RequestHosts.filter(self, spec, index)
        if self.first is None:
            self._remember(spec)
        return left

    async def filter_async(self, spec: RequestSpec, index: int) -> int:
        return self.filter(spec, index)

    def pick(self, spec: RequestSpec) -> Ordering:
        if self.first is None:  # forced hosts: no filter ran
            self._remember(spec)
        ordering = RequestHosts.pick(self, spec)
        first = self.first
        if first is not None and not self.weighed:
            self.weighed = True
            terms = tuple((w.name, tuple(t.tolist())) for w, t in self.weigh_terms(spec))
            weights = tuple(ordering.weights.tolist())
            self.first = dataclasses.replace(first, terms=terms, weights=weights)
        return ordering

    def _remember(self, spec: RequestSpec) -> None:
        self.first = FirstInstance(
            spec=spec,
            reasons=Diagnostics.freeze(self.reasons),
            survivors=tuple(self.cur.tolist()),
        )


class ScratchEngine(DecisionEngine):
    """A DecisionEngine whose requests run on scratch copies of the hosts they are given.

    ``deferred``: consumption does not rebuild the host's column row at once; the caller
    rebuilds the rows of many hosts in one pass (``columns.slots``) before filtering again.
    """

    traced: TracedHosts | None = None
    deferred: bool = False

    copies: dict[int, HostState] | None = None

    def refresh(self, state: HostState) -> None:
        if not self.deferred:
            DecisionEngine.refresh(self, state)

    async def prepare(self, states: Sequence[HostState], chunk: int = PREPARE_CHUNK) -> None:
        """Copy ``states`` and build their column rows ahead, yielding to the event loop
        between chunks, so that ``start`` over 10,000 hosts does not stall the live
        scheduler; states not prepared are copied in ``start``."""
        copies: dict[int, HostState] = {}
        for i in range(0, len(states), chunk):
            part = [scratch_copy(s) for s in states[i : i + chunk]]
            copies.update(zip(map(id, states[i : i + chunk]), part, strict=True))
            self.columns.slots(part)
            await asyncio.sleep(0)
        self.copies = copies

    def _copy(self, state: HostState) -> HostState:
        got = self.copies.pop(id(state), None) if self.copies is not None else None
        return got if got is not None else scratch_copy(state)

    def start(
        self, states: Sequence[HostState], cands: Sequence[list[dict[str, Any]]] | None = None
    ) -> RequestHosts:
        hosts = DecisionEngine.start(self, [self._copy(s) for s in states], cands)
        fields = {f.name: getattr(hosts, f.name) for f in dataclasses.fields(RequestHosts)}
        self.traced = TracedHosts(**fields)
        return self.traced

    async def start_async(
        self, states: Sequence[HostState], cands: Sequence[list[dict[str, Any]]] | None = None
    ) -> RequestHosts:
        """:meth:`start` on copies (``prepare`` has built their rows with turns given)."""
        return self.start(states, cands)


class DryRunManager(SchedulerManager):
    """SchedulerManager over a ScratchCache and NoClaims, with a ScratchEngine (through
    the manager's public ``build_engine``). It is always the filter scheduler: under
    ``[asyncsched] driver = chance`` explain and capacity still describe the filters."""

    engine: ScratchEngine

    def build_engine(self, config: Config) -> ScratchEngine:
        live = super().build_engine(config)
        return ScratchEngine(config, live.filters, live.weighers, clock=self.clock, rng=self.rng)

    @classmethod
    def over(
        cls,
        config: Config,
        cache: HostCache,
        placement: Placement,
        *,
        clock: Callable[[], datetime],
        seed: int | None = None,
        keep: bool = True,
    ) -> DryRunManager:
        """A dry-run manager over the live cache and Placement client (``keep``: see
        ScratchCache; False only where nothing is released or rolled back)."""
        return cls(
            config,
            ScratchCache(cache, keep=keep),
            NoClaims(placement, keep=keep),
            clock=clock,
            rng=random.Random(seed),
            diagnostics=Diagnostics(size=1),
        )

    @property
    def no_claims(self) -> NoClaims:
        assert isinstance(self.placement, NoClaims)
        return self.placement

    async def traced_hosts(self, spec: RequestSpec) -> tuple[TracedHosts, RequestSpec]:
        """The real candidate step (pre-filters, Placement) over scratch copies."""
        offer = await self.hosts_for(_context(spec), spec)
        assert isinstance(offer.hosts, TracedHosts)
        return offer.hosts, offer.spec


def _context(spec: RequestSpec) -> RequestContext:
    return RequestContext(
        request_id=f"req-dryrun-{uuidlib.uuid4()}",
        project_id=spec.project_id,
        user_id=spec.user_id,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class DryRun:
    """The outcome of one dry run."""

    selections: list[list[Selection]]  # [] on NoValidHost
    summary: RequestSummary
    hosts: TracedHosts | None  # None when it ended before the hosts (Placement said none)
    claims: Mapping[str, Mapping[str, Any]]  # instance uuid -> allocation request, not sent
    engine: ScratchEngine  # the run's filters and weighers, to judge one host alone
    error: str | None = None  # NoValidHost's reason


async def dry_run(
    config: Config,
    cache: HostCache,
    placement: Placement,
    spec: RequestSpec,
    *,
    clock: Callable[[], datetime],
    seed: int | None = None,
) -> DryRun:
    """What select_destinations would answer now for ``spec``; claims and assumes nothing."""
    mgr = DryRunManager.over(config, cache, placement, clock=clock, seed=seed)
    uuids = [str(uuidlib.uuid4()) for _ in range(max(1, spec.num_instances))]
    selections: list[list[Selection]] = []
    error: str | None = None
    try:
        selections = await mgr.select_destinations(_context(spec), spec, uuids, True, True)
    except NoValidHost as exc:
        error = why_no_host(exc, "No valid host was found.")
    summary = mgr.diagnostics.recent()[-1]
    claims = dict(mgr.no_claims.claims)
    return DryRun(selections, summary, mgr.engine.traced, claims, mgr.engine, error)


def why_no_host(exc: NoValidHost, default: str) -> str:
    """NoValidHost's reason; when Placement failed (the manager turns that into NoValidHost,
    as nova does), say so rather than "no candidates"."""
    cause = exc.__cause__
    if isinstance(cause, PlacementError):
        return f"Placement failed: {cause}"
    return exc.reason or default
