"""The chance driver (``[asyncsched] driver = chance``): nova's old ChanceScheduler, made safe.

Random up compute hosts (``ignore_hosts`` honoured, nova's NoValidHost messages), but unlike the
removed upstream driver it still asks Placement for candidates and claims each instance, so it
cannot overcommit. No filters, no weighers.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from asyncsched.common.clock import as_utc, utcnow
from asyncsched.common.pacing import Pacer
from asyncsched.conf.options import Config
from asyncsched.exceptions import NoValidHost, PlacementError
from asyncsched.objects.models import RequestContext, RequestSpec, Selection
from asyncsched.placement.microversions import CANDIDATES_VERSION
from asyncsched.placement.query import build_resource_request
from asyncsched.scheduling.selection import NOT_ENOUGH, make_selection
from asyncsched.scheduling.servicegroup import service_is_up
from asyncsched.state.host_state import HostState

if TYPE_CHECKING:
    from asyncsched.scheduling.interfaces import HostCache, Placement

LOG = logging.getLogger(__name__)


class ChanceScheduler:
    """Random placement behind the SchedulerAPI, with Placement claims."""

    def __init__(
        self,
        config: Config,
        cache: HostCache,
        placement: Placement,
        *,
        rng: random.Random | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.config = config
        self.cache = cache
        self.placement = placement
        self.rng = rng if rng is not None else random.Random()
        self.clock = clock

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

    async def select_destinations(
        self,
        ctx: RequestContext,
        spec: RequestSpec,
        instance_uuids: Sequence[str] | None,
        return_objects: bool,
        return_alternates: bool,
    ) -> list[list[Selection]]:
        return_alternates = return_alternates and return_objects
        await self.cache.fresh_services()  # services as of this request, as nova reads them
        hosts = self._up_hosts(spec)
        claims = instance_uuids is not None and not spec.is_rebuild
        by_rp: dict[str, list[dict[str, Any]]] = {}
        version = CANDIDATES_VERSION
        if claims:
            try:
                request = build_resource_request(spec, self.config)
                cands = await self.placement.get_allocation_candidates(request)
            except PlacementError as exc:
                LOG.error("Placement allocation candidates query failed: %s", exc)
                raise NoValidHost(reason="") from exc
            by_rp = cands.alloc_reqs_by_rp_uuid
            version = str(cands.version)
            hosts = [h for h in hosts if by_rp.get(h.uuid)]
        uuids = list(instance_uuids) if instance_uuids is not None else [None] * spec.num_instances
        project_id = spec.project_id or ctx.project_id or ""
        user_id = spec.user_id or ctx.user_id or ""
        chosen: list[tuple[HostState, dict[str, Any] | None]] = []
        claimed: list[str] = []
        pacer = Pacer()  # a big request without claims never awaits: give the loop turns
        try:
            for instance_uuid in uuids:
                await pacer.tick()
                pool = list(hosts)
                self.rng.shuffle(pool)
                picked: tuple[HostState, dict[str, Any] | None] | None = None
                for host in pool:
                    if not claims:
                        picked = (host, None)
                        break
                    assert instance_uuid is not None
                    alloc = by_rp[host.uuid][0]
                    ok = await self.placement.claim(
                        instance_uuid,
                        alloc,
                        project_id=project_id,
                        user_id=user_id,
                        allocation_request_version=version,
                    )
                    if ok:
                        claimed.append(instance_uuid)
                        picked = (host, alloc)
                        break
                if picked is None:
                    raise NoValidHost(reason=NOT_ENOUGH)
                chosen.append(picked)
        except BaseException:
            if claimed:
                await self.placement.rollback(claimed)
            raise
        num_alts = self.config.scheduler.max_attempts - 1 if return_alternates else 0
        selected = {id(h) for h, _ in chosen}
        out: list[list[Selection]] = []
        for host, host_alloc in chosen:
            await pacer.tick()
            first = make_selection(
                host,
                self.config,
                allocation_request=host_alloc,
                version=version if host_alloc else None,
            )
            row = [first]
            others = [h for h in hosts if id(h) not in selected and h.cell_uuid == host.cell_uuid]
            for alt in self.rng.sample(others, min(num_alts, len(others))):
                alt_alloc: dict[str, Any] | None = by_rp[alt.uuid][0] if claims else None
                row.append(
                    make_selection(
                        alt,
                        self.config,
                        allocation_request=alt_alloc,
                        version=version if alt_alloc else None,
                    )
                )
            out.append(row)
        return out


__all__ = ["ChanceScheduler", "service_is_up"]
