"""SchedulerManager: nova's select_destinations, end to end (reference §1).

pre-filters -> Placement query (+ PCPU fallback) -> host states for the candidates (cache)
-> per instance: filter -> weigh -> pick -> assume (consume) -> claim in Placement
-> Selections with alternates. Claims of a multi-create overlap in time (bounded by
``[asyncsched] claim_concurrency``) while decisions stay sequential: instance k is consumed
on its host before its claim is sent, so instance k+1 already sees it; a failed claim
releases that consumption and the instance is decided again on the hosts left. Any failure
rolls back every claim of the request before NoValidHost is raised.
"""

from __future__ import annotations

import dataclasses
import logging
import operator
import random
import time
import uuid as uuidlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from asyncsched.common.clock import utcnow
from asyncsched.common.pacing import Pacer
from asyncsched.common.recorder import NO_RECORDER, Recorder
from asyncsched.conf.options import Config
from asyncsched.exceptions import (
    AllocationUpdateFailed,
    ConfigError,
    ConsumerHeld,
    NoValidHost,
    PlacementError,
)
from asyncsched.objects.models import (
    NUMATopologyLimits,
    RequestContext,
    RequestSpec,
    Selection,
)
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.claims import ClaimBatch, ClaimResult
from asyncsched.placement.microversions import CANDIDATES_VERSION
from asyncsched.placement.prefilters import run_prefilters
from asyncsched.placement.query import build_resource_request
from asyncsched.resources.numa.consume import place_numa_pci
from asyncsched.scheduling.chance import ChanceScheduler
from asyncsched.scheduling.diagnostics import Diagnostics, RequestSummary
from asyncsched.scheduling.engine import DecisionEngine, RequestHosts
from asyncsched.scheduling.filters.compute_filter import ComputeFilter
from asyncsched.scheduling.interfaces import HostCache, Notifier, Placement
from asyncsched.scheduling.loader import load_filters, load_weighers
from asyncsched.scheduling.selection import NOT_ENOUGH, make_selection
from asyncsched.state.host_state import HostState, PlacedNumaPci

LOG = logging.getLogger(__name__)
_UUID = operator.attrgetter("uuid")


@dataclasses.dataclass(slots=True)
class _Placed:
    """One instance placed by this request."""

    uuid: str
    base: int  # index into RequestHosts (-1: adopted on a host outside them)
    alloc: Mapping[str, Any] | None
    adopted: HostState | None = None  # the host when base is -1

    def host(self, hosts: RequestHosts) -> HostState:
        return self.adopted if self.adopted is not None else hosts.states[self.base]


class _Request:
    """The mutable state of one select_destinations call."""

    def __init__(
        self,
        mgr: SchedulerManager,
        ctx: RequestContext,
        spec: RequestSpec,
        hosts: RequestHosts,
        engine: DecisionEngine,
        version: str | None,
        claims: bool,
    ) -> None:
        self.mgr = mgr
        self.ctx = ctx
        self.spec = spec
        self.hosts = hosts
        self.engine = engine
        self.version = version
        self.claims = claims
        self.placed: list[_Placed] = []
        # (instance uuid, host uuid) -> host: what this request consumed, in order
        self.consumed: dict[tuple[str, str], HostState] = {}
        self.failed: dict[str, set[int]] = {}
        # the first instance's pick order: nova takes a lone instance's alternates from it
        self.first_order: Iterable[int] | None = None
        self.claim_wait = 0.0  # seconds spent waiting for Placement's answers to the claims
        # Deciding, settling and releasing are linear in the instances, and give the loop a
        # turn every few ms so one big multi-create never stalls other calls or heartbeats.
        self.pacer = Pacer()

    # -- consumption -----------------------------------------------------------------------

    async def consume(self, base: int, spec: RequestSpec, instance_uuid: str) -> None:
        alloc = self.hosts.cands[base][0] if self.hosts.cands[base] else None
        limits = self.hosts.limits.get(base, {}).get("numa_topology")
        await self.consume_on(self.hosts.states[base], spec, instance_uuid, alloc, limits)

    async def consume_on(
        self,
        host: HostState,
        spec: RequestSpec,
        instance_uuid: str,
        alloc: Mapping[str, Any] | None,
        limits: object,
    ) -> None:
        async with host.lock:
            placed: PlacedNumaPci | None = None
            wants = spec.numa_topology is not None or (
                spec.pci_requests is not None and spec.pci_requests.requests
            )
            if wants and place_numa_pci is not None:
                try:
                    placed = place_numa_pci(
                        host,
                        spec,
                        limits=limits if isinstance(limits, NUMATopologyLimits) else None,
                        provider_mapping=alloc.get("mappings") if alloc else None,
                        pack=self.mgr.config.compute.packing_host_numa_cells_allocation_strategy,
                    )
                except Exception:  # nova: consume errors are logged and swallowed
                    LOG.exception("NUMA/PCI consume failed on %s", host.nodename)
            try:
                if placed is None:
                    self.mgr.cache.consume_locked(host, spec, instance_uuid)
                else:  # kept as usage, re-applied over every refresh until confirmed
                    self.mgr.cache.consume_locked(host, spec, instance_uuid, placed=placed)
            except Exception:
                LOG.exception("consume failed on %s; continuing (nova semantics)", host.nodename)
        self.consumed[instance_uuid, host.uuid] = host
        self.engine.refresh(host)

    async def release(self, base: int, instance_uuid: str) -> None:
        host = self.hosts.states[base]
        try:
            await self.mgr.cache.release(host, instance_uuid)
        except Exception:
            LOG.exception("release failed on %s", host.nodename)
        self.consumed.pop((instance_uuid, host.uuid), None)
        self.engine.refresh(host)

    async def release_all(self) -> None:
        """Every host rebuilt once, however many instances it took (linear)."""
        consumed, self.consumed = self.consumed, {}
        try:
            await self.mgr.cache.release_many((h, u) for (u, _), h in consumed.items())
        finally:
            for host in {id(h): h for h in consumed.values()}.values():
                self.engine.refresh(host)
                await self.pacer.tick()

    # -- spec bookkeeping between instances ------------------------------------------------

    def after_placed(self, spec: RequestSpec, base: int, instance_uuid: str) -> RequestSpec:
        """nova's _consume_selected_host: the group learns the host (and member)."""
        group = spec.instance_group
        if group is None:
            return spec
        host = self.hosts.states[base].host
        members = (
            group.members if instance_uuid in group.members else (*group.members, instance_uuid)
        )
        return dataclasses.replace(
            spec,
            instance_group=dataclasses.replace(group, hosts=(*group.hosts, host), members=members),
        )


class _NoNotifications:
    """nova's default (noop driver): nothing is sent."""

    def select_destinations(self, phase: str, ctx: RequestContext, spec: RequestSpec) -> None:
        return None


class SchedulerManager:
    """The SchedulerAPI implementation (filter scheduler or, by config, the chance driver)."""

    def __init__(
        self,
        config: Config,
        cache: HostCache,
        placement: Placement,
        *,
        clock: Callable[[], datetime] = utcnow,
        rng: random.Random | None = None,
        diagnostics: Diagnostics | None = None,
        recorder: Recorder = NO_RECORDER,
        notifier: Notifier | None = None,
    ) -> None:
        self.recorder = recorder
        self.notifier: Notifier = notifier if notifier is not None else _NoNotifications()
        self.cache = cache
        self.placement = placement
        self.clock = clock
        self.rng = rng if rng is not None else random.Random()
        self.diagnostics = diagnostics if diagnostics is not None else Diagnostics()
        self.config = config
        self._requests = 0
        # (alloc_reqs_by_rp_uuid, key, hosts, their allocation requests): _host_view's last
        self._view: (
            tuple[object, tuple[Any, ...], list[HostState], list[list[dict[str, Any]]]] | None
        ) = None
        self.engine = self._build(config)
        self._chance = self._build_chance(config)

    # -- configuration ---------------------------------------------------------------------

    def _build(self, config: Config) -> DecisionEngine:
        filters = load_filters(config)
        for f in filters:
            if isinstance(f, ComputeFilter):
                f.clock = self.clock
        weighers = load_weighers(config)
        old = getattr(self, "engine", None)
        return DecisionEngine(
            config,
            filters,
            weighers,
            columns=old.columns if old is not None else None,
            clock=self.clock,
            rng=self.rng,
        )

    def _build_chance(self, config: Config) -> ChanceScheduler | None:
        """The chance driver when ``[asyncsched] driver = chance``, else None."""
        if config.asyncsched.driver != "chance":
            return None
        return ChanceScheduler(config, self.cache, self.placement, rng=self.rng, clock=self.clock)

    def reconfigure(self, config: Config) -> None:
        """SIGHUP: new filter/weigher instances and multipliers; on ConfigError the old stay."""
        engine = self._build(config)  # raises ConfigError before anything changes
        self.config = config
        self.engine = engine
        self._chance = self._build_chance(config)
        LOG.info(
            "scheduler reconfigured: filters %s; weighers %s",
            [f.name for f in engine.filters],
            [w.name for w in engine.weighers],
        )

    # -- the RPC entry point ---------------------------------------------------------------

    async def select_destinations(
        self,
        ctx: RequestContext,
        spec: RequestSpec,
        instance_uuids: Sequence[str] | None,
        return_objects: bool,
        return_alternates: bool,
    ) -> list[list[Selection]]:
        """nova's _select_destinations: start notification, schedule, end notification."""
        self.notifier.select_destinations("start", ctx, spec)
        result = await self._select_destinations(
            ctx, spec, instance_uuids, return_objects, return_alternates
        )
        self.notifier.select_destinations("end", ctx, spec)
        return result

    async def _select_destinations(
        self,
        ctx: RequestContext,
        spec: RequestSpec,
        instance_uuids: Sequence[str] | None,
        return_objects: bool,
        return_alternates: bool,
    ) -> list[list[Selection]]:
        if self._chance is not None:
            try:
                chosen = await self._chance.select_destinations(
                    ctx, spec, instance_uuids, return_objects, return_alternates
                )
            except NoValidHost:
                self.recorder.no_valid_host("chance_driver")
                raise
            self.recorder.scheduled(len(chosen))
            return chosen
        engine = self.engine
        self._requests += 1
        if self._requests % 1000 == 0:  # drop column rows of hosts that left the cache
            engine.columns.forget_missing(self.cache.all_hosts())
        return_alternates = return_alternates and return_objects
        hosts: RequestHosts | None = None
        req: _Request | None = None
        selected: list[str] = []
        outcome = "ok"
        recorder = self.recorder
        try:
            t0 = time.perf_counter()
            hosts, version, claims, spec = await self._hosts_for(ctx, spec, engine)
            t1 = time.perf_counter()
            recorder.phase("candidates", t1 - t0)
            req = _Request(self, ctx, spec, hosts, engine, version, claims)
            result = await self._schedule(req, instance_uuids, return_alternates)
            recorder.phase("decide", time.perf_counter() - t1 - req.claim_wait)
            recorder.phase("claim", req.claim_wait)
            selected = [r[0].compute_node_uuid for r in result]
            recorder.scheduled(len(result))
            return result
        except NoValidHost as exc:
            outcome = f"NoValidHost: {exc.reason}"
            recorder.no_valid_host(_nvh_cause(exc, hosts, req))
            raise
        except Exception as exc:
            outcome = f"error: {type(exc).__name__}"
            raise
        finally:
            summary = RequestSummary(
                request_id=ctx.request_id,
                candidates=hosts.initial if hosts is not None else 0,
                reasons=Diagnostics.freeze(hosts.reasons) if hosts is not None else {},
                selected=tuple(selected),
                outcome=outcome,
            )
            self.diagnostics.record(summary)
            # A failed request is what an operator asks "why?" about: say it at INFO, as nova
            # logs its filter results when filtering removed every host; successes at DEBUG.
            level = logging.DEBUG if outcome == "ok" else logging.INFO
            if LOG.isEnabledFor(level):
                LOG.log(level, "select_destinations %s: %s", ctx.request_id, summary.line())

    # -- steps -----------------------------------------------------------------------------

    def _nodes_for(self, host: str | None, node: str | None) -> list[str]:
        if host:
            found = self.cache.get_by_host_node(host, node)
            if not found:  # nova's lookup is case-insensitive in practice (MySQL collation)
                want = host.lower()
                found = [
                    h
                    for h in self.cache.all_hosts()
                    if h.host.lower() == want and (node is None or h.nodename == node)
                ]
        else:
            found = [h for h in self.cache.all_hosts() if h.nodename == node]
        return [h.uuid for h in found]

    async def _hosts_for(
        self, ctx: RequestContext, spec: RequestSpec, engine: DecisionEngine
    ) -> tuple[RequestHosts, str | None, bool, RequestSpec]:
        """Candidates from Placement (or every host on rebuild) as a RequestHosts."""
        config = self.config
        aggregates = self.cache.aggregates()
        engine.set_aggregates(aggregates)
        if spec.is_rebuild:
            states = self._restrict_cell(spec, self.cache.all_hosts())
            return engine.start(states), None, False, spec
        fresh = await self.cache.begin_fresh_services()  # services read while Placement answers
        spec = run_prefilters(ctx, spec, config, aggregates)
        request = build_resource_request(spec, config, nodes_for=self._nodes_for)
        try:
            cands = await self.placement.get_allocation_candidates(request)
            if request.cpu_pinning_requested and not config.workarounds.disable_fallback_pcpu_query:
                fallback = build_resource_request(
                    spec, config, enable_pinning_translate=False, nodes_for=self._nodes_for
                )
                cands = cands.merge(await self.placement.get_allocation_candidates(fallback))
        except PlacementError as exc:
            LOG.error("Placement allocation candidates query failed: %s", exc)
            raise NoValidHost(reason="") from exc
        if not cands.allocation_requests:
            LOG.debug("Got no allocation candidates from the Placement API.")
            raise NoValidHost(reason="")
        await fresh  # services as of this request, as nova reads them (ComputeFilter)
        states, per_host = self._host_view(spec, cands)
        return engine.start(states, per_host), str(cands.version), True, spec

    def _host_view(
        self, spec: RequestSpec, cands: Candidates
    ) -> tuple[list[HostState], list[list[dict[str, Any]]]]:
        """The hosts of an answer (in its order) and each one's allocation requests.

        The mirror hands out the same ``alloc_reqs_by_rp_uuid`` object while its answer
        holds (the usual case between two refreshes), so the view of the last answer is
        kept while that object, the cell restriction and the cache's hosts are the same: a
        request then skips three passes over 10,000 hosts. The lists are read-only
        (``DecisionEngine.start`` copies what a request changes)."""
        by_rp = cands.alloc_reqs_by_rp_uuid
        dest = spec.requested_destination
        key = (
            self.cache.hosts_epoch,
            None if dest is None or dest.cell is None else dest.cell.uuid,
            None if dest is None else dest.allow_cross_cell_move,
        )
        kept = self._view
        if kept is not None and kept[0] is by_rp and kept[1] == key:
            return kept[2], kept[3]
        states = self._restrict_cell(spec, self.cache.get_by_uuids(cands.provider_summaries))
        # one C-level pass over the (often 10,000) hosts; a host without one gets []
        got = list(map(by_rp.get, map(_UUID, states)))
        empty: list[dict[str, Any]] = []
        per_host = (
            [x if x is not None else empty for x in got]
            if None in got
            else cast(list[list[dict[str, Any]]], got)
        )
        self._view = (by_rp, key, states, per_host)
        return states, per_host

    @staticmethod
    def _restrict_cell(spec: RequestSpec, states: list[HostState]) -> list[HostState]:
        dest = spec.requested_destination
        if dest is not None and dest.cell is not None and not dest.allow_cross_cell_move:
            cell = dest.cell.uuid
            return [s for s in states if s.cell_uuid == cell]
        return states

    async def _schedule(
        self, req: _Request, instance_uuids: Sequence[str] | None, return_alternates: bool
    ) -> list[list[Selection]]:
        config = self.config
        spec = req.spec
        hosts = req.hosts
        legacy = instance_uuids is None or not req.claims
        num = spec.num_instances if instance_uuids is None else len(instance_uuids)
        uuids = (
            list(instance_uuids)
            if instance_uuids is not None
            else [
                str(uuidlib.uuid4())
                for _ in range(num)  # request-local bookkeeping only
            ]
        )
        project_id = spec.project_id or req.ctx.project_id or ""
        user_id = spec.user_id or req.ctx.user_id or ""
        batch = ClaimBatch(
            self.placement,
            concurrency=config.asyncsched.claim_concurrency,
            project_id=project_id,
            user_id=user_id,
            allocation_request_version=req.version or CANDIDATES_VERSION,
        )
        skip_filters = hosts.apply_host_rules(spec)
        index = 0
        try:
            for index, instance_uuid in enumerate(uuids):
                await req.pacer.tick()
                spec = dataclasses.replace(
                    spec, instance_uuid=None if instance_uuids is None else instance_uuid
                )
                placed = await self._place_one(
                    req, batch, spec, index, instance_uuid, legacy, skip_filters, exclude=set()
                )
                if placed is None:
                    break
                spec = req.after_placed(spec, placed.base, instance_uuid)
            if len(req.placed) == num and not legacy:
                await self._settle(req, batch, spec, index, skip_filters)
            if len(req.placed) != num:
                raise NoValidHost(reason=NOT_ENOUGH)
        except BaseException:
            deleted = await batch.rollback()
            if deleted:
                self.recorder.rollback(deleted)
            await req.release_all()
            raise
        if legacy:
            await req.release_all()  # no claims: the consumption was request-local (nova)
        alternates = await self._alternates(req, spec, index, skip_filters, return_alternates)
        out: list[list[Selection]] = []
        for i, p in enumerate(req.placed):
            await req.pacer.tick()
            host = p.host(hosts)
            first = make_selection(
                host,
                config,
                allocation_request=p.alloc,
                version=req.version if p.alloc is not None else None,
                limits=hosts.limits.get(p.base),
            )
            out.append([first, *alternates[i]] if return_alternates else [first])
        return out

    async def _place_one(
        self,
        req: _Request,
        batch: ClaimBatch,
        spec: RequestSpec,
        index: int,
        instance_uuid: str,
        legacy: bool,
        skip_filters: bool,
        exclude: set[int],
    ) -> _Placed | None:
        """Decide one instance, consume it and submit its claim (not awaited)."""
        hosts = req.hosts
        if not skip_filters and not hosts.filter(spec, index):
            return None
        if not len(hosts):
            return None
        ordering = hosts.pick(spec)
        if legacy:
            if index == 0:
                req.first_order = ordering.indices()
            base = ordering.chosen_index
            await req.consume(base, spec, instance_uuid)
            placed = _Placed(instance_uuid, base, None)
            req.placed.append(placed)
            return placed
        order = ordering.indices()
        if index == 0 and not exclude:
            req.first_order = order
        for base in order:
            if base in exclude or not hosts.cands[base]:
                continue
            alloc = hosts.cands[base][0]
            await req.consume(base, spec, instance_uuid)
            placed = _Placed(instance_uuid, base, alloc)
            req.placed.append(placed)
            batch.submit(instance_uuid, alloc, on_failure=None)
            return placed
        return None

    async def _settle(
        self,
        req: _Request,
        batch: ClaimBatch,
        spec: RequestSpec,
        index: int,
        skip_filters: bool,
    ) -> None:
        """Wait for the claims; re-place any instance whose claim failed (nova walks on)."""
        while True:
            waited = time.perf_counter()
            results = await batch.wait()
            req.claim_wait += time.perf_counter() - waited
            failed: list[ClaimResult] = []
            for r in results.values():
                if r.ok:
                    continue
                if isinstance(r.error, AllocationUpdateFailed):
                    await self._adopt(req, batch, spec, r.error)  # or raises
                else:
                    failed.append(r)
            if not failed:  # every claim answered: ok or adopted
                return
            position = {p.uuid: i for i, p in enumerate(req.placed)}
            for r in failed:
                await req.pacer.tick()
                pos = position[r.consumer_uuid]
                old = req.placed[pos]
                await req.release(old.base, old.uuid)
                tried = req.failed.setdefault(old.uuid, set())
                tried.add(old.base)
                batch.forget(old.uuid)
                self.recorder.claim_replaced()
                LOG.info(
                    "claim for %s on %s failed; trying the next host",
                    old.uuid,
                    req.hosts.states[old.base].nodename,
                )
                retry_spec = dataclasses.replace(spec, instance_uuid=old.uuid)
                placed = await self._place_one(
                    req,
                    batch,
                    retry_spec,
                    max(index, 1),
                    old.uuid,
                    False,
                    skip_filters,
                    exclude=tried,
                )
                if placed is None:
                    raise NoValidHost(reason=NOT_ENOUGH)
                req.placed[pos] = req.placed.pop()  # the retry takes the old one's place

    async def _adopt(
        self, req: _Request, batch: ClaimBatch, spec: RequestSpec, err: AllocationUpdateFailed
    ) -> None:
        """A redelivered call whose first delivery claimed this instance and died unacked:
        answer with the host Placement already holds it on (select_destinations is
        idempotent per instance uuid). A held allocation that differs from what we asked
        for, or lies on no known host, keeps the failure."""
        uuid = str(err.kwargs.get("consumer_uuid"))
        pos = next((i for i, p in enumerate(req.placed) if p.uuid == uuid), None)
        held = err.held if isinstance(err, ConsumerHeld) else {}
        alloc = {"allocations": {rp: {"resources": dict(res)} for rp, res in held.items()}}
        roots = self.cache.get_by_uuids(held)
        if pos is None or len(roots) != 1 or _totals(alloc) != _totals(req.placed[pos].alloc):
            raise AllocationUpdateFailed(err.message, **err.kwargs) from err
        host, old = roots[0], req.placed[pos]
        await req.release(old.base, old.uuid)
        batch.forget(old.uuid)
        base = next((i for i, s in enumerate(req.hosts.states) if s is host), -1)
        limits = req.hosts.limits.get(base, {}).get("numa_topology")
        one = dataclasses.replace(spec, instance_uuid=uuid)
        await req.consume_on(host, one, uuid, alloc, limits)
        req.placed[pos] = _Placed(uuid, base, alloc, host if base < 0 else None)
        LOG.warning(
            "%s already holds allocations on %s (a redelivered request): answering with that host",
            uuid,
            host.nodename,
        )

    async def _alternates(
        self,
        req: _Request,
        spec: RequestSpec,
        index: int,
        skip_filters: bool,
        return_alternates: bool,
    ) -> list[list[Selection]]:
        """max_attempts-1 per instance: same cell, not selected, unclaimed, first candidate."""
        num_alts = self.config.scheduler.max_attempts - 1 if return_alternates else 0
        out: list[list[Selection]] = [[] for _ in req.placed]
        if num_alts <= 0 or not req.placed:
            return out
        hosts = req.hosts
        order = req.first_order
        if index > 0 or order is None or req.failed:
            # nova filters and weighs again only after the first instance
            # (_get_alternate_hosts); a lone instance's alternates follow its pick's order
            if index > 0 and not skip_filters:
                hosts.filter(spec, index)
            if not len(hosts):
                return out
            order = hosts.pick(spec).indices()
        selected = {p.base for p in req.placed}
        for i, p in enumerate(req.placed):
            await req.pacer.tick()
            cell = p.host(hosts).cell_uuid
            for base in order:
                if len(out[i]) >= num_alts:
                    break
                host = hosts.states[base]
                if base in selected or host.cell_uuid != cell:
                    continue
                if req.claims and not hosts.cands[base]:
                    continue
                alloc = hosts.cands[base][0] if req.claims else None
                out[i].append(
                    make_selection(
                        host,
                        self.config,
                        allocation_request=alloc,
                        version=req.version if alloc is not None else None,
                        limits=hosts.limits.get(base),
                    )
                )
        return out


def _totals(allocs: Mapping[str, Any] | None) -> dict[str, int]:
    """Resources by class over every provider of an allocation (request or held)."""
    out: dict[str, int] = {}
    for a in ((allocs or {}).get("allocations") or {}).values():
        for rc, n in (a.get("resources") or {}).items():
            out[rc] = out.get(rc, 0) + int(n)
    return out


def _nvh_cause(exc: NoValidHost, hosts: RequestHosts | None, req: _Request | None) -> str:
    """The bounded label a NoValidHost is counted under: who left no host.

    Before hosts exist: Placement failed (the error is the cause), Placement offered no
    candidate (the bare NoValidHost of ``_hosts_for``), or the request itself was refused
    (pre-filters, flavor/image constraints). After: the filter or host rule that emptied the
    list, else refused claims, else too few hosts for the instances.
    """
    if hosts is None:
        if isinstance(exc.__cause__, PlacementError):
            return "placement_error"
        return "placement_no_candidates" if exc.__cause__ is None and not exc.reason else "request"
    if hosts.emptied_by is not None:
        return hosts.emptied_by
    return "claims" if req is not None and req.failed else "not_enough_hosts"


def check_config(config: Config) -> None:
    """Validate the plugin lists without building a manager (``asyncsched check-config``)."""
    load_filters(config)
    load_weighers(config)
    if config.asyncsched.driver not in ("filter_scheduler", "chance"):
        raise ConfigError(f"[asyncsched] driver: unknown driver {config.asyncsched.driver!r}")
