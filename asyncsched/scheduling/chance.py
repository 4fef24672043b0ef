"""The chance driver (``[asyncsched] driver = chance``): nova's old ChanceScheduler, made safe.

Random up compute hosts (``ignore_hosts`` honoured, nova's NoValidHost messages), but unlike the
removed upstream driver it still asks Placement for candidates and claims each instance, so it
cannot overcommit. No filters, no weighers. A :class:`~asyncsched.scheduling.interfaces.Strategy`
of its own, chosen in ``app.py``; it shares the candidate step (Placement's answer, a failure
as NoValidHost) and the Selection step with the filter scheduler.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from asyncsched.common.clock import as_utc
from asyncsched.common.pacing import Pacer
from asyncsched.conf.options import Config
from asyncsched.exceptions import NoValidHost
from asyncsched.objects.models import RequestContext, RequestSpec, Selection
from asyncsched.placement.microversions import CANDIDATES_VERSION
from asyncsched.placement.query import build_resource_request
from asyncsched.scheduling.interfaces import Strategy
from asyncsched.scheduling.loader import load_filters, load_weighers
from asyncsched.scheduling.selection import NOT_ENOUGH, host_selection
from asyncsched.scheduling.servicegroup import service_is_up
from asyncsched.state.host_state import HostState

LOG = logging.getLogger(__name__)


class ChanceScheduler(Strategy):
    """Random placement behind the SchedulerAPI, with Placement claims."""

    def reconfigure(self, config: Config) -> None:
        """SIGHUP: the new config; a filter or weigher list that does not load raises
        ConfigError and keeps the old (as under the filter scheduler: check-config agrees)."""
        load_filters(config)
        load_weighers(config)
        self.config = config

    def plugins(self) -> tuple[list[str], list[str]]:
        return [], []  # no filters, no weighers

    def _up_hosts(self, spec: RequestSpec) -> list[HostState]:
        now = as_utc(self.clock())
        down = timedelta(seconds=self.config.default.service_down_time)
        hosts = [
            h
            for h in self.cache.all_hosts()
            if h.service is not None
            and not h.service.disabled
            and service_is_up(h.service, now, down)
        ]
        if not hosts:
            raise NoValidHost(reason="Is the appropriate service running?")
        ignore = {x.lower() for x in spec.ignore_hosts or ()}
        hosts = [h for h in hosts if h.host.lower() not in ignore]
        if not hosts:
            raise NoValidHost(reason="Could not find another compute")
        return hosts

    async def decide(
        self,
        ctx: RequestContext,
        spec: RequestSpec,
        instance_uuids: Sequence[str] | None,
        return_objects: bool,
        return_alternates: bool,
    ) -> list[list[Selection]]:
        """Random up hosts; counted as the filter scheduler counts (``chance_driver`` for
        every NoValidHost)."""
        try:
            chosen = await self._decide(
                ctx, spec, instance_uuids, return_objects, return_alternates
            )
        except NoValidHost:
            self.recorder.no_valid_host("chance_driver")
            raise
        self.recorder.scheduled(len(chosen))
        return chosen

    async def _decide(
        self,
        ctx: RequestContext,
        spec: RequestSpec,
        instance_uuids: Sequence[str] | None,
        return_objects: bool,
        return_alternates: bool,
    ) -> list[list[Selection]]:
        await self.cache.fresh_services()  # services as of this request, as nova reads them
        hosts = self._up_hosts(spec)
        claims = instance_uuids is not None and not spec.is_rebuild
        offer = _Offer(hosts, {}, CANDIDATES_VERSION)
        if claims:
            offer = await self._candidates(spec, hosts)
        uuids: list[str | None] = (
            list(instance_uuids) if instance_uuids is not None else [None] * spec.num_instances
        )
        owner = (spec.project_id or ctx.project_id or "", spec.user_id or ctx.user_id or "")
        pacer = Pacer()  # a big request without claims never awaits: give the loop turns
        chosen = await self._choose(offer, uuids, claims, owner, pacer)
        num_alts = (
            self.config.scheduler.max_attempts - 1 if return_alternates and return_objects else 0
        )
        selected = {id(h) for h, _ in chosen}
        out: list[list[Selection]] = []
        for host, host_alloc in chosen:
            await pacer.tick()
            others = [
                h for h in offer.hosts if id(h) not in selected and h.cell_uuid == host.cell_uuid
            ]
            alts = self.rng.sample(others, min(num_alts, len(others)))
            row = [(host, host_alloc)]
            row += [(alt, offer.by_rp[alt.uuid][0] if claims else None) for alt in alts]
            out.append([host_selection(h, self.config, alloc, offer.version) for h, alloc in row])
        return out

    async def _candidates(self, spec: RequestSpec, hosts: list[HostState]) -> _Offer:
        """Placement's allocation candidates, and the up hosts that have one."""
        cands = await self.allocation_candidates(build_resource_request(spec, self.config))
        by_rp = cands.alloc_reqs_by_rp_uuid
        return _Offer([h for h in hosts if by_rp.get(h.uuid)], by_rp, str(cands.version))

    async def _choose(
        self,
        offer: _Offer,
        uuids: list[str | None],
        claims: bool,
        owner: tuple[str, str],
        pacer: Pacer,
    ) -> list[_Pick]:
        """A random host per instance (claimed in Placement when ``claims``); on any failure
        the claims made so far are rolled back."""
        chosen: list[_Pick] = []
        claimed: list[str] = []
        try:
            for instance_uuid in uuids:
                await pacer.tick()
                pool = list(offer.hosts)
                self.rng.shuffle(pool)
                picked = await self._pick(pool, offer, instance_uuid, claims, owner)
                if picked is None:
                    raise NoValidHost(reason=NOT_ENOUGH)
                if claims:
                    assert instance_uuid is not None
                    claimed.append(instance_uuid)
                chosen.append(picked)
        except BaseException:
            if claimed:
                await self.placement.rollback(claimed)
            raise
        return chosen

    async def _pick(
        self,
        pool: list[HostState],
        offer: _Offer,
        instance_uuid: str | None,
        claims: bool,
        owner: tuple[str, str],
    ) -> _Pick | None:
        """The first host of the shuffled ``pool`` that takes the instance, if any."""
        for host in pool:
            if not claims:
                return (host, None)
            assert instance_uuid is not None
            alloc = offer.by_rp[host.uuid][0]
            ok = await self.placement.claim(
                instance_uuid,
                alloc,
                project_id=owner[0],
                user_id=owner[1],
                allocation_request_version=offer.version,
            )
            if ok:
                return (host, alloc)
        return None


_Pick = tuple[HostState, dict[str, Any] | None]


@dataclass(frozen=True, slots=True)
class _Offer:
    """The hosts to choose from, and (with claims) Placement's candidates for them."""

    hosts: list[HostState]
    by_rp: dict[str, list[dict[str, Any]]]
    version: str


__all__ = ["ChanceScheduler", "service_is_up"]
