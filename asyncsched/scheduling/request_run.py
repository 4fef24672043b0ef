"""One select_destinations call of the filter scheduler, from its hosts to its Selections.

``SchedulerManager`` finds the request's hosts (pre-filters, Placement, the cache) and builds
a :class:`RequestRun` with everything the call needs: the cache to consume on, the Placement
client to claim through, the config and the recorder. The run owns the call's state (what it
placed, consumed, tried and waited for) and its steps, and the manager awaits ``run``:

per instance: filter -> weigh -> pick -> assume (consume) -> claim in Placement, then settle
the claims (a refused one releases its consumption and the instance is decided again on the
hosts left), then Selections with alternates. Any failure rolls back every claim of the call
before NoValidHost is raised. Claims of a multi-create overlap in time (bounded by
``[asyncsched] claim_concurrency``) while decisions stay sequential: instance k is consumed
on its host before its claim is sent, so instance k+1 already sees it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid as uuidlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from asyncsched.common.pacing import Pacer
from asyncsched.common.recorder import Recorder
from asyncsched.conf.options import Config
from asyncsched.exceptions import AllocationUpdateFailed, ConsumerHeld, NoValidHost
from asyncsched.objects.models import (
    NUMATopologyLimits,
    RequestContext,
    RequestSpec,
    Selection,
)
from asyncsched.placement.claims import ClaimBatch, ClaimResult
from asyncsched.placement.microversions import CANDIDATES_VERSION
from asyncsched.resources.numa.consume import place_numa_pci
from asyncsched.scheduling.candidates.source import Fits, RefusalAware
from asyncsched.scheduling.engine import DecisionEngine, RequestHosts
from asyncsched.scheduling.interfaces import HostCache, Placement
from asyncsched.scheduling.selection import NOT_ENOUGH, host_selection
from asyncsched.state.host_state import HostState, PlacedNumaPci

LOG = logging.getLogger("asyncsched.scheduling.manager")  # operators filter on this name


@dataclasses.dataclass(slots=True)
class Placed:
    """One instance placed by this request."""

    uuid: str
    base: int  # index into RequestHosts (-1: adopted on a host outside them)
    alloc: Mapping[str, Any] | None
    adopted: HostState | None = None  # the host when base is -1

    def host(self, hosts: RequestHosts) -> HostState:
        return self.adopted if self.adopted is not None else hosts.states[self.base]


@dataclasses.dataclass(frozen=True, slots=True)
class RunServices:
    """What a run works with, handed over by the manager (nothing reaches back into it)."""

    config: Config
    cache: HostCache
    placement: Placement
    recorder: Recorder


def restrict_cell(spec: RequestSpec, states: list[HostState]) -> list[HostState]:
    """The hosts of the requested cell (a same-cell move), else all of them."""
    dest = spec.requested_destination
    if dest is not None and dest.cell is not None and not dest.allow_cross_cell_move:
        cell = dest.cell.uuid
        return [s for s in states if s.cell_uuid == cell]
    return states


class RequestRun:
    """The state and steps of one select_destinations call over its ``hosts``.

    ``claims``: Placement gave candidates and the caller gave instance uuids, so each
    instance is claimed; otherwise (nova's legacy form, a rebuild) the consumption is
    request-local and released before the Selections are built.
    """

    def __init__(
        self,
        services: RunServices,
        ctx: RequestContext,
        spec: RequestSpec,
        hosts: RequestHosts,
        engine: DecisionEngine,
        *,
        version: str | None,
        claims: bool,
    ) -> None:
        self._config = services.config
        self._cache = services.cache
        self._placement = services.placement
        self._recorder = services.recorder
        self.ctx = ctx
        self.spec = spec
        self.hosts = hosts
        self.engine = engine
        self.version = version
        self.claims = claims
        self.placed: list[Placed] = []
        # (instance uuid, host uuid) -> host: what this request consumed, in order
        self.consumed: dict[tuple[str, str], HostState] = {}
        # instance uuid -> base indices whose claim failed for it
        self.failed: dict[str, set[int]] = {}
        # instances found holding allocations from before this request (a move's source):
        # their claims take nova's merge path
        self.moves: set[str] = set()
        # the first instance's pick order: nova takes a lone instance's alternates from it
        self.first_order: Iterable[int] | None = None
        self.claim_wait = 0.0  # seconds spent waiting for Placement's answers to the claims
        # Deciding, settling and releasing are linear in the instances, and give the loop a
        # turn every few ms so one big multi-create never stalls other calls or heartbeats.
        self.pacer = Pacer()

    # -- the call ----------------------------------------------------------------------------

    async def run(
        self, instance_uuids: Sequence[str] | None, return_alternates: bool
    ) -> list[list[Selection]]:
        """Place every instance (claimed unless legacy), then the Selections."""
        spec = self.spec
        legacy = instance_uuids is None or not self.claims
        num = spec.num_instances if instance_uuids is None else len(instance_uuids)
        # Without instance uuids, request-local ones for the bookkeeping only, made as the
        # instances are placed: 10,000 uuid4() at once held the loop for 40 ms or more.
        uuids: Iterable[str] = (
            instance_uuids
            if instance_uuids is not None
            else (str(uuidlib.uuid4()) for _ in range(num))
        )
        batch = ClaimBatch(
            self._placement,
            concurrency=self._config.asyncsched.claim_concurrency,
            project_id=spec.project_id or self.ctx.project_id or "",
            user_id=spec.user_id or self.ctx.user_id or "",
            allocation_request_version=self.version or CANDIDATES_VERSION,
        )
        skip_filters = self.hosts.apply_host_rules(spec)
        keep_uuids = instance_uuids is not None
        try:
            spec, index = await self._place_all(batch, uuids, keep_uuids, legacy, skip_filters)
            if len(self.placed) == num and not legacy:
                await self._settle(batch, spec, index, skip_filters)
            if len(self.placed) != num:
                raise NoValidHost(reason=NOT_ENOUGH)
        except BaseException:
            deleted = await batch.rollback()
            if deleted:
                self._recorder.rollback(deleted)
            await self.release_all()
            raise
        if legacy:
            await self.release_all()  # no claims: the consumption was request-local (nova)
        alternates = await self._alternates(spec, index, skip_filters, return_alternates)
        return await self._selections(alternates, return_alternates)

    async def _place_all(
        self,
        batch: ClaimBatch,
        uuids: Iterable[str],
        keep_uuids: bool,
        legacy: bool,
        skip_filters: bool,
    ) -> tuple[RequestSpec, int]:
        """Each instance in turn until one finds no host; the spec and index it ended at."""
        spec = self.spec
        index = 0
        for index, instance_uuid in enumerate(uuids):
            await self.pacer.tick()
            spec = dataclasses.replace(spec, instance_uuid=instance_uuid if keep_uuids else None)
            placed = await self._place_one(
                batch, spec, index, instance_uuid, legacy, skip_filters, exclude=set()
            )
            if placed is None:
                break
            spec = self.after_placed(spec, placed.base, instance_uuid)
        return spec, index

    async def _selections(
        self, alternates: list[list[Selection]], return_alternates: bool
    ) -> list[list[Selection]]:
        hosts = self.hosts
        out: list[list[Selection]] = []
        for i, p in enumerate(self.placed):
            await self.pacer.tick()
            first = host_selection(
                p.host(hosts), self._config, p.alloc, self.version, hosts.limits.get(p.base)
            )
            out.append([first, *alternates[i]] if return_alternates else [first])
        return out

    # -- one instance ------------------------------------------------------------------------

    async def _place_one(
        self,
        batch: ClaimBatch,
        spec: RequestSpec,
        index: int,
        instance_uuid: str,
        legacy: bool,
        skip_filters: bool,
        exclude: set[int],
        fits: Fits | None = None,
    ) -> Placed | None:
        """Decide one instance, consume it and submit its claim (not awaited); ``fits``
        (after a refused claim) passes over hosts whose allocation request no longer fits."""
        hosts = self.hosts
        if not skip_filters and not await hosts.filter_async(spec, index):
            return None
        if not len(hosts):
            return None
        ordering = hosts.pick(spec)
        if legacy:
            if index == 0:
                self.first_order = ordering.indices()
            base = ordering.chosen_index
            await self.consume(base, spec, instance_uuid)
            placed = Placed(instance_uuid, base, None)
            self.placed.append(placed)
            return placed
        order = ordering.indices()
        if index == 0 and not exclude:
            self.first_order = order
        for base in order:
            if base in exclude or not hosts.cands[base]:
                continue
            alloc = hosts.cands[base][0]
            if fits is not None and not fits(alloc):
                continue
            await self.consume(base, spec, instance_uuid)
            placed = Placed(instance_uuid, base, alloc)
            self.placed.append(placed)
            batch.submit(instance_uuid, alloc, may_have_allocations=instance_uuid in self.moves)
            return placed
        return None

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

    # -- consumption -------------------------------------------------------------------------

    async def consume(self, base: int, spec: RequestSpec, instance_uuid: str) -> None:
        """Assume ``instance_uuid`` on host ``base`` (with its first allocation candidate)."""
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
                        pack=self._config.compute.packing_host_numa_cells_allocation_strategy,
                    )
                except Exception:  # nova: consume errors are logged and swallowed
                    LOG.exception("NUMA/PCI consume failed on %s", host.nodename)
            try:
                if placed is None:
                    self._cache.consume_locked(host, spec, instance_uuid)
                else:  # kept as usage, re-applied over every refresh until confirmed
                    self._cache.consume_locked(host, spec, instance_uuid, placed=placed)
            except Exception:
                LOG.exception("consume failed on %s; continuing (nova semantics)", host.nodename)
        self.consumed[instance_uuid, host.uuid] = host
        self.engine.refresh(host)

    async def release(self, host: HostState, instance_uuid: str) -> None:
        try:
            await self._cache.release(host, instance_uuid)
        except Exception:
            LOG.exception("release failed on %s", host.nodename)
        self.consumed.pop((instance_uuid, host.uuid), None)
        self.engine.refresh(host)

    async def release_all(self) -> None:
        """Every host rebuilt once, however many instances it took (linear)."""
        consumed, self.consumed = self.consumed, {}
        try:
            await self._cache.release_many((h, u) for (u, _), h in consumed.items())
        finally:
            for host in {id(h): h for h in consumed.values()}.values():
                self.engine.refresh(host)
                await self.pacer.tick()

    # -- claims ------------------------------------------------------------------------------

    async def _settle(
        self, batch: ClaimBatch, spec: RequestSpec, index: int, skip_filters: bool
    ) -> None:
        """Wait for the claims; re-place any instance whose claim failed (nova walks on)."""
        while True:
            waited = time.perf_counter()
            results = await batch.wait()
            self.claim_wait += time.perf_counter() - waited
            failed: list[ClaimResult] = []
            resent = False
            for r in results.values():
                if r.ok:
                    continue
                if isinstance(r.error, AllocationUpdateFailed):
                    resent |= await self._held(batch, spec, r.error)  # or raises
                else:
                    failed.append(r)
            if not failed and not resent:  # every claim answered: ok or adopted
                return
            position = {p.uuid: i for i, p in enumerate(self.placed)}
            for r in failed:
                await self.pacer.tick()
                await self._replace(batch, spec, index, skip_filters, position[r.consumer_uuid])

    async def _replace(
        self, batch: ClaimBatch, spec: RequestSpec, index: int, skip_filters: bool, pos: int
    ) -> None:
        """The instance at ``pos`` lost its claim: release it, decide it again elsewhere."""
        old = self.placed[pos]
        await self.release(old.host(self.hosts), old.uuid)
        tried = self.failed.setdefault(old.uuid, set())
        tried.add(old.base)
        batch.forget(old.uuid)
        self._recorder.claim_replaced()
        LOG.info(
            "claim for %s on %s failed; trying the next host",
            old.uuid,
            old.host(self.hosts).nodename,
        )
        retry_spec = dataclasses.replace(spec, instance_uuid=old.uuid)
        fits = None
        if isinstance(self._placement, RefusalAware):  # the view the refusal asked for
            fits = await self._placement.after_refusal(old.uuid)
        placed = await self._place_one(
            batch, retry_spec, max(index, 1), old.uuid, False, skip_filters, tried, fits
        )
        if placed is None:
            raise NoValidHost(reason=NOT_ENOUGH)
        self.placed[pos] = self.placed.pop()  # the retry takes the old one's place

    async def _held(
        self, batch: ClaimBatch, spec: RequestSpec, err: AllocationUpdateFailed
    ) -> bool:
        """A claim met allocations its instance already holds (docs/moves.md).

        The held allocation is split by host. Its part on hosts this request excludes (host
        rules, filters, hosts already tried) is a move's source: evacuate leaves the instance
        holding the dead source's allocation. A part on one host the request accepts, equal
        to what we asked for, is an earlier delivery's claim of this same call: adopted.
        Only a source: the claim is sent again the way nova's claim_resources sends a move's
        (read, merge, PUT with the consumer generation); True then (wait for it). Anything
        else keeps the failure.
        """
        uuid = str(err.kwargs.get("consumer_uuid"))
        pos = next((i for i, p in enumerate(self.placed) if p.uuid == uuid), None)
        if pos is None or not isinstance(err, ConsumerHeld):
            raise AllocationUpdateFailed(err.message, **err.kwargs) from err
        one = dataclasses.replace(spec, instance_uuid=uuid)
        known = self._cache.get_by_uuids(err.held)
        accepted = [h for h in known if self._accepts(one, pos, h)]
        source = {h.uuid for h in known} - {h.uuid for h in accepted}
        rest = {rp: res for rp, res in err.held.items() if rp not in source}
        alloc = {"allocations": {rp: {"resources": dict(res)} for rp, res in rest.items()}}
        if len(accepted) == 1 and _totals(alloc) == _totals(self.placed[pos].alloc):
            await self._adopt(batch, one, pos, accepted[0], alloc)
            # taken over (fenced, rolled back with the call): wait for that write
            others = {rp: res for rp, res in err.held.items() if rp not in rest}
            return err.generation is not None and batch.take_over(
                uuid, alloc, err.generation, others
            )
        if source and not accepted:
            old = self.placed[pos]
            self.moves.add(uuid)
            batch.forget(uuid)
            assert old.alloc is not None
            batch.submit(uuid, old.alloc, may_have_allocations=True)
            LOG.info(
                "%s holds allocations on %s, a host this request excludes (a move's source): "
                "claiming %s with them, as nova does",
                uuid,
                ", ".join(sorted(h.nodename for h in known if h.uuid in source)),
                old.host(self.hosts).nodename,
            )
            return True
        LOG.warning(
            "%s holds allocations on %s that are neither this call's earlier claim nor a "
            "move's source: the claim fails",
            uuid,
            sorted(err.held),
        )
        raise AllocationUpdateFailed(err.message, **err.kwargs) from err

    def _accepts(self, spec: RequestSpec, index: int, host: HostState) -> bool:
        """Whether this request may answer ``host`` for instance ``index``: not tried
        already, in the requested cell, and kept by the host rules and the filters."""
        tried = self.failed.get(spec.instance_uuid or "", set())
        if any(b >= 0 and self.hosts.states[b] is host for b in tried):
            return False
        if not restrict_cell(spec, [host]):
            return False
        one = self.engine.start([host])
        if one.apply_host_rules(spec):
            return len(one) == 1  # forced: filters skipped, as for the request itself
        return len(one) == 1 and one.filter(spec, index) == 1

    async def _adopt(
        self,
        batch: ClaimBatch,
        spec: RequestSpec,
        pos: int,
        host: HostState,
        alloc: Mapping[str, Any],
    ) -> None:
        """A redelivered call whose first delivery claimed this instance and died unacked:
        answer with the host Placement already holds it on (select_destinations is
        idempotent per instance uuid)."""
        old = self.placed[pos]
        uuid = old.uuid
        await self.release(old.host(self.hosts), uuid)
        batch.forget(uuid)
        base = next((i for i, s in enumerate(self.hosts.states) if s is host), -1)
        limits = self.hosts.limits.get(base, {}).get("numa_topology")
        await self.consume_on(host, spec, uuid, alloc, limits)
        self.placed[pos] = Placed(uuid, base, alloc, host if base < 0 else None)
        LOG.warning(
            "%s already holds allocations on %s (a redelivered request): answering with that host",
            uuid,
            host.nodename,
        )

    # -- alternates --------------------------------------------------------------------------

    async def _alternates(
        self, spec: RequestSpec, index: int, skip_filters: bool, return_alternates: bool
    ) -> list[list[Selection]]:
        """max_attempts-1 per instance: same cell, not selected, unclaimed, first candidate."""
        num_alts = self._config.scheduler.max_attempts - 1 if return_alternates else 0
        out: list[list[Selection]] = [[] for _ in self.placed]
        if num_alts <= 0 or not self.placed:
            return out
        hosts = self.hosts
        order = self.first_order
        if index > 0 or order is None or self.failed:
            # nova filters and weighs again only after the first instance
            # (_get_alternate_hosts); a lone instance's alternates follow its pick's order
            if index > 0 and not skip_filters:
                hosts.filter(spec, index)
            if not len(hosts):
                return out
            order = hosts.pick(spec).indices()
        selected = {p.base for p in self.placed}
        for i, p in enumerate(self.placed):
            await self.pacer.tick()
            cell = p.host(hosts).cell_uuid
            for base in order:
                if len(out[i]) >= num_alts:
                    break
                host = hosts.states[base]
                if base in selected or host.cell_uuid != cell:
                    continue
                if self.claims and not hosts.cands[base]:
                    continue
                alloc = hosts.cands[base][0] if self.claims else None
                selection = host_selection(
                    host, self._config, alloc, self.version, hosts.limits.get(base)
                )
                out[i].append(selection)
        return out


def _totals(allocs: Mapping[str, Any] | None) -> dict[str, int]:
    """Resources by class over every provider of an allocation (request or held)."""
    out: dict[str, int] = {}
    for a in ((allocs or {}).get("allocations") or {}).values():
        for rc, n in (a.get("resources") or {}).items():
            out[rc] = out.get(rc, 0) + int(n)
    return out
