"""SchedulerManager: nova's filter scheduler behind select_destinations (reference §1).

pre-filters -> Placement query (+ PCPU fallback) -> host states for the candidates (cache)
-> a :class:`~asyncsched.scheduling.request_run.RequestRun` decides, claims and answers the
call (filter -> weigh -> pick -> assume -> claim per instance, then Selections with
alternates). The manager owns what outlives a call (the engine, rebuilt on SIGHUP; the last
host view; diagnostics) and counts each call's phases and outcome.

Public extension points (the dry run's, ``dryrun.DryRunManager``): ``build_engine(config)``
makes the engine every call runs on, ``hosts_for(ctx, spec)`` is the candidate step alone and
``request_run(...)`` builds a call's run.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import operator
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from asyncsched.common.clock import utcnow
from asyncsched.common.recent import Recent
from asyncsched.common.recorder import NO_RECORDER, Recorder
from asyncsched.conf.options import Config
from asyncsched.exceptions import ConfigError, NoValidHost, PlacementError
from asyncsched.objects.models import RequestContext, RequestSpec, Selection
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.prefilters import run_prefilters
from asyncsched.placement.query import ResourceRequest, build_resource_request
from asyncsched.scheduling.diagnostics import Diagnostics, RequestSummary
from asyncsched.scheduling.engine import DecisionEngine, RequestHosts
from asyncsched.scheduling.filters.compute_filter import ComputeFilter
from asyncsched.scheduling.interfaces import HostCache, Notifier, Placement, Strategy
from asyncsched.scheduling.loader import load_filters, load_weighers
from asyncsched.scheduling.request_run import RequestRun, RunServices, restrict_cell
from asyncsched.state.host_state import HostState

LOG = logging.getLogger(__name__)
_UUID = operator.attrgetter("uuid")
#: hosts of an answer looked up in the cache between two turns given to the event loop
VIEW_CHUNK = 16384
#: host views kept, one per answer (``LocalCandidates`` keeps ``ANSWERS`` of them: a mix of
#: flavors asks for several in turn)
VIEWS = 8
#: providers an answer may lack against a kept view's to be found by a scan each (a C-level
#: pass of string compares) rather than by a membership test of every host
DERIVED_SCANS = 16


@dataclass(frozen=True, slots=True)
class Offer:
    """The candidate step's answer: the request's hosts and how to claim on them."""

    hosts: RequestHosts
    spec: RequestSpec  # after the pre-filters
    version: str | None  # the allocation requests' microversion (None: no Placement query)
    claims: bool  # False on rebuild: every cached host is a candidate, nothing is claimed
    # seconds waited, after Placement answered, for the services reads begun for the request
    services_wait: float = 0.0


class SchedulerManager(Strategy):
    """The filter scheduler: the SchedulerAPI's ``select_destinations`` over filters,
    weighers and Placement claims (``[asyncsched] driver = filter_scheduler``)."""

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
        super().__init__(
            config,
            cache,
            placement,
            clock=clock,
            rng=rng,
            diagnostics=diagnostics,
            recorder=recorder,
            notifier=notifier,
        )
        self._requests = 0
        # by id of alloc_reqs_by_rp_uuid, the last VIEWS views _host_view made (most recent
        # last): (that object, key, hosts, their allocation requests)
        self._views: Recent[
            int, tuple[object, tuple[Any, ...], list[HostState], list[list[dict[str, Any]]]]
        ] = Recent(VIEWS)
        self.engine = self.build_engine(config)

    # -- configuration ---------------------------------------------------------------------

    def build_engine(self, config: Config) -> DecisionEngine:
        """The engine every call runs on: ``config``'s filters and weighers over the shared
        columns (kept across SIGHUP). Raises ConfigError for a plugin it cannot load."""
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

    def reconfigure(self, config: Config) -> None:
        """SIGHUP: new filter/weigher instances and multipliers; on ConfigError the old stay."""
        engine = self.build_engine(config)  # raises ConfigError before anything changes
        self.config = config
        self.engine = engine
        LOG.info(
            "scheduler reconfigured: filters %s; weighers %s",
            [f.name for f in engine.filters],
            [w.name for w in engine.weighers],
        )

    def plugins(self) -> tuple[list[str], list[str]]:
        return [f.name for f in self.engine.filters], [w.name for w in self.engine.weighers]

    def request_run(
        self, ctx: RequestContext, offer: Offer, engine: DecisionEngine | None = None
    ) -> RequestRun:
        """One call's run over ``offer``, with what it needs from this manager."""
        services = RunServices(self.config, self.cache, self.placement, self.recorder)
        return RequestRun(
            services,
            ctx,
            offer.spec,
            offer.hosts,
            engine if engine is not None else self.engine,
            version=offer.version,
            claims=offer.claims,
        )

    # -- one call ----------------------------------------------------------------------------

    async def decide(
        self,
        ctx: RequestContext,
        spec: RequestSpec,
        instance_uuids: Sequence[str] | None,
        return_objects: bool,
        return_alternates: bool,
    ) -> list[list[Selection]]:
        """Candidates, then a RequestRun; phases, outcome and diagnostics recorded."""
        engine = self.engine
        self._requests += 1
        if self._requests % 1000 == 0:  # drop column rows of hosts that left the cache
            engine.columns.forget_missing(self.cache.all_hosts())
        return_alternates = return_alternates and return_objects
        hosts: RequestHosts | None = None
        run: RequestRun | None = None
        selected: list[str] = []
        outcome = "ok"
        recorder = self.recorder
        try:
            t0 = time.perf_counter()
            offer = await self.hosts_for(ctx, spec, engine)
            hosts = offer.hosts
            t1 = time.perf_counter()
            recorder.phase("candidates", t1 - t0)
            recorder.phase("services", offer.services_wait)  # a part of candidates
            run = self.request_run(ctx, offer, engine)
            result = await run.run(instance_uuids, return_alternates)
            recorder.phase("decide", time.perf_counter() - t1 - run.claim_wait)
            recorder.phase("claim", run.claim_wait)
            selected = [r[0].compute_node_uuid for r in result]
            recorder.scheduled(len(result))
            return result
        except NoValidHost as exc:
            outcome = f"NoValidHost: {exc.reason}"
            recorder.no_valid_host(_nvh_cause(exc, hosts, run))
            raise
        except Exception as exc:
            outcome = f"error: {type(exc).__name__}"
            raise
        finally:
            self._record(ctx, hosts, selected, outcome)

    def _record(
        self, ctx: RequestContext, hosts: RequestHosts | None, selected: list[str], outcome: str
    ) -> None:
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

    # -- the candidate step ------------------------------------------------------------------

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

    async def hosts_for(
        self, ctx: RequestContext, spec: RequestSpec, engine: DecisionEngine | None = None
    ) -> Offer:
        """Candidates from Placement (or every host on rebuild) as ``engine``'s
        RequestHosts (this manager's engine by default); NoValidHost when there are none."""
        engine = engine if engine is not None else self.engine
        config = self.config
        aggregates = self.cache.aggregates()
        engine.set_aggregates(aggregates)
        if spec.is_rebuild:
            states = restrict_cell(spec, self.cache.all_hosts())
            return Offer(engine.start(states), spec, None, False)
        fresh = await self.cache.begin_fresh_services()  # services read while Placement answers
        spec = run_prefilters(ctx, spec, config, aggregates)
        request = build_resource_request(spec, config, nodes_for=self._nodes_for)
        fallback = None
        if request.cpu_pinning_requested and not config.workarounds.disable_fallback_pcpu_query:
            prefiltered = spec

            def fallback() -> ResourceRequest:
                return build_resource_request(
                    prefiltered, config, enable_pinning_translate=False, nodes_for=self._nodes_for
                )

        cands = await self.allocation_candidates(request, fallback)
        if not cands.allocation_requests:
            LOG.debug("Got no allocation candidates from the Placement API.")
            raise NoValidHost(reason="")
        waited = time.perf_counter()
        await fresh  # services as of this request, as nova reads them (ComputeFilter)
        waited = time.perf_counter() - waited
        states, per_host = await self._host_view(spec, cands)
        hosts = await engine.start_async(states, per_host)
        return Offer(hosts, spec, str(cands.version), True, services_wait=waited)

    async def _host_view(
        self, spec: RequestSpec, cands: Candidates
    ) -> tuple[list[HostState], list[list[dict[str, Any]]]]:
        """The hosts of an answer (in its order) and each one's allocation requests.

        The mirror hands out the same ``alloc_reqs_by_rp_uuid`` object while its answer
        holds (the usual case between two refreshes), so the view of each of the last
        ``VIEWS`` answers is kept while that object, the cell restriction and the cache's
        hosts are the same: a request then skips three passes over 10,000 hosts. An answer
        that is a kept one less a few roots (``Candidates.derived``) gets that view less
        their hosts. The lists are read-only (``DecisionEngine.start`` copies what a request
        changes)."""
        by_rp = cands.alloc_reqs_by_rp_uuid
        dest = spec.requested_destination
        key = (
            self.cache.hosts_epoch,
            None if dest is None or dest.cell is None else dest.cell.uuid,
            None if dest is None else dest.allow_cross_cell_move,
        )
        view = _view_of(self._views.get(id(by_rp)), by_rp, key)
        if view is not None:
            return view
        view = self._derived_view(cands, key)
        if view is None:
            view = await self._new_view(spec, cands)
        self._views.put(id(by_rp), (by_rp, key, *view))  # or made meanwhile by another request
        return view

    def _derived_view(
        self, cands: Candidates, key: tuple[Any, ...]
    ) -> tuple[list[HostState], list[list[dict[str, Any]]]] | None:
        """The view of an answer that is a kept view's answer less a few providers (roots
        that left it): that view less their hosts, by C-level passes (a view made anew
        looks 100,000 hosts up)."""
        derived = cands.derived
        if derived is None:
            return None
        prior = _view_of(self._views.peek(id(derived[0])), derived[0], key)
        if prior is None:
            return None
        less, (hosts, per_host) = derived[1], prior
        names = list(map(_UUID, hosts))
        if len(less) > DERIVED_SCANS:
            keep = list(map(operator.not_, map(less.__contains__, names)))
            return list(itertools.compress(hosts, keep)), list(itertools.compress(per_host, keep))
        at: list[int] = []
        for u in less:
            with contextlib.suppress(ValueError):  # not a host of this view: nested, a cell
                at.append(names.index(u))
        states, per = hosts.copy(), per_host.copy()
        for i in sorted(at, reverse=True):
            del states[i], per[i]
        return states, per

    async def _new_view(
        self, spec: RequestSpec, cands: Candidates
    ) -> tuple[list[HostState], list[list[dict[str, Any]]]]:
        """The hosts of ``cands`` looked up in the cache and each one's allocation requests,
        ``VIEW_CHUNK`` hosts between two turns given to the event loop (at 100,000 hosts the
        lookups in one piece held it tens of ms)."""
        by_rp = cands.alloc_reqs_by_rp_uuid
        states: list[HostState] = []
        per_host: list[list[dict[str, Any]]] = []
        empty: list[dict[str, Any]] = []
        it = iter(cands.provider_summaries)
        for n in itertools.count():
            part = list(itertools.islice(it, VIEW_CHUNK))
            if not part:
                break
            if n:
                await asyncio.sleep(0)
            hosts = restrict_cell(spec, self.cache.get_by_uuids(part))
            # one C-level pass over the part's hosts; a host without one gets []
            got = list(map(by_rp.get, map(_UUID, hosts)))
            states += hosts
            per_host += (
                [x if x is not None else empty for x in got]
                if None in got
                else cast(list[list[dict[str, Any]]], got)
            )
        return states, per_host


def _view_of(
    kept: tuple[object, tuple[Any, ...], list[HostState], list[list[dict[str, Any]]]] | None,
    by_rp: object,
    key: tuple[Any, ...],
) -> tuple[list[HostState], list[list[dict[str, Any]]]] | None:
    """A kept view's hosts and allocation requests if it is the view of ``by_rp`` itself (not
    of an object that had its id before) under the same restriction ``key``."""
    if kept is None or kept[0] is not by_rp or kept[1] != key:
        return None
    return kept[2], kept[3]


def _nvh_cause(exc: NoValidHost, hosts: RequestHosts | None, run: RequestRun | None) -> str:
    """The bounded label a NoValidHost is counted under: who left no host.

    Before hosts exist: Placement failed (the error is the cause), Placement offered no
    candidate (the bare NoValidHost of ``hosts_for``), or the request itself was refused
    (pre-filters, flavor/image constraints). After: the filter or host rule that emptied the
    list, else refused claims, else too few hosts for the instances.
    """
    if hosts is None:
        if isinstance(exc.__cause__, PlacementError):
            return "placement_error"
        return "placement_no_candidates" if exc.__cause__ is None and not exc.reason else "request"
    if hosts.emptied_by is not None:
        return hosts.emptied_by
    return "claims" if run is not None and run.failed else "not_enough_hosts"


def check_config(config: Config) -> None:
    """Validate the plugin lists without building a manager (``asyncsched check-config``)."""
    load_filters(config)
    load_weighers(config)
    if config.asyncsched.driver not in ("filter_scheduler", "chance"):
        raise ConfigError(f"[asyncsched] driver: unknown driver {config.asyncsched.driver!r}")
