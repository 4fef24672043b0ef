"""Where a request's allocation candidates come from: the mirror when it can answer, else
Placement's ``GET /allocation_candidates`` shared by identical concurrent requests.

:class:`CandidateSource` stands where the Placement client stood for the scheduler (same
``get_allocation_candidates`` / ``claim`` / ``rollback``). Placement still judges every claim:
claims go to the client unchanged. The source only learns from them: an accepted claim is
subtracted from the mirror until a refresh shows it; a refused one makes the mirror read
Placement again at once, and the instance is decided again on the hosts left once that read
is in (bounded: ``after_refusal``), without the hosts it shows full.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from asyncsched.common.health import Snapshot
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.claims import TakesOver
from asyncsched.placement.microversions import CANDIDATES_VERSION
from asyncsched.placement.query import ResourceRequest
from asyncsched.placement.traits import COMPUTE_STATUS_DISABLED
from asyncsched.scheduling.candidates.local import Fallback, LocalCandidates
from asyncsched.scheduling.candidates.single_flight import SingleFlight
from asyncsched.scheduling.interfaces import Placement
from asyncsched.state.placement_mirror import PlacementMirror

LOG = logging.getLogger(__name__)

MIRROR = "mirror"
PLACEMENT = "placement"

#: refusals remembered for a retry (a claim refused and never placed again is forgotten)
REFUSALS_KEPT = 1024

#: whether an allocation request still fits, as the mirror sees Placement now
Fits = Callable[[Mapping[str, Any]], bool]


@runtime_checkable
class RefusalAware(Protocol):
    """A claim path that can say, after a refused claim, where the instance still fits."""

    async def after_refusal(self, consumer_uuid: str) -> Fits | None: ...


@dataclass(frozen=True, slots=True)
class CandidatesHealth(Snapshot):
    """``CandidateSource.health()``: where allocation candidates come from, and why."""

    source: str  # MIRROR or PLACEMENT
    why_not_mirror: str | None
    paths: dict[str, int]  # lookups by source: {"mirror": n, "placement": n}
    fallback_reasons: dict[str, int]
    last_path: str | None
    last_local_ms: float
    get_calls: int
    get_shared: int
    refusal_waits: int  # retries after a refused claim that waited for the mirror's refresh
    refusal_timeouts: int  # ... and were placed again without it (the bound reached)


class CandidateSource:
    """Component ``candidates``: path choice, counts and the single-flight GET."""

    name = "candidates"

    def __init__(
        self, client: Placement, mirror: PlacementMirror | None, *, services_judge: bool = False
    ) -> None:
        self.client = client
        self.mirror = mirror
        # With ComputeFilter on, the services table read for each request judges a disabled
        # host; the mirror's copy of the COMPUTE_STATUS_DISABLED trait lags it by a refresh,
        # and would refuse a host enabled just before the request (nova's computes change the
        # trait in Placement before the API answers the enable).
        self._services_judge = services_judge
        self._local = LocalCandidates()
        self._flight: SingleFlight[Candidates] = SingleFlight()
        self.paths: Counter[str] = Counter()  # "mirror", "placement"
        self.reasons: Counter[str] = Counter()  # why "placement"
        self.last_path: str | None = None
        self._local_ms = 0.0
        self._refused: dict[str, float] = {}  # consumer -> when its refusal asked a refresh
        self.refusal_waits = 0  # retries that waited for the refresh their refusal asked
        self.refusal_timeouts = 0  # ... and placed again without it (bound reached)

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    # ---- candidates ----

    async def get_allocation_candidates(self, request: ResourceRequest) -> Candidates:
        reason = "no [placement_database] connection (or placement_mirror = false)"
        mirror = self.mirror
        if mirror is not None:
            state, reason = mirror.serving()
            if state is not None:
                t0 = time.perf_counter()
                local = self._for_mirror(request)
                got = await self._local.compute_async(state, local, mirror.pending_usage())
                self._local_ms = (time.perf_counter() - t0) * 1000
                if not isinstance(got, Fallback):
                    self._count(MIRROR, None)
                    LOG.debug(
                        "allocation candidates from the mirror: %d hosts in %.1f ms",
                        len(got.allocation_requests),
                        self._local_ms,
                    )
                    return got
                reason = got.reason
        self._count(PLACEMENT, reason)
        return await self._flight.run(
            request.to_querystring(), lambda: self.client.get_allocation_candidates(request)
        )

    def _for_mirror(self, request: ResourceRequest) -> ResourceRequest:
        """The request the mirror answers: without the disabled-compute trait when the
        services read judges it (ComputeFilter on), as fresh as nova's per-request read."""
        if not self._services_judge or COMPUTE_STATUS_DISABLED not in request.root_forbidden:
            return request
        return replace(request, root_forbidden=request.root_forbidden - {COMPUTE_STATUS_DISABLED})

    def _count(self, path: str, reason: str | None) -> None:
        self.paths[path] += 1
        self.last_path = path if reason is None else f"{path} ({reason})"
        if reason is not None:
            self.reasons[reason] += 1
            LOG.debug("allocation candidates from Placement's GET: %s", reason)

    # ---- claims: Placement judges; the mirror learns ----

    async def claim(
        self,
        consumer_uuid: str,
        allocation_request: Mapping[str, Any],
        *,
        project_id: str,
        user_id: str,
        allocation_request_version: str = CANDIDATES_VERSION,
        may_have_allocations: bool = False,
    ) -> bool:
        ok = False
        try:
            ok = await self.client.claim(
                consumer_uuid,
                allocation_request,
                project_id=project_id,
                user_id=user_id,
                allocation_request_version=allocation_request_version,
                may_have_allocations=may_have_allocations,
            )
        finally:
            if self.mirror is not None:
                if ok:
                    self.mirror.note_claimed(consumer_uuid, allocation_request)
                else:  # what the mirror showed was wrong for this provider: read it now
                    self._refused[consumer_uuid] = self.mirror.refresh_soon()
                    if len(self._refused) > REFUSALS_KEPT:  # never retried: forget the oldest
                        del self._refused[next(iter(self._refused))]
        return ok

    async def after_refusal(self, consumer_uuid: str) -> Fits | None:
        """Before ``consumer_uuid`` is placed again after its claim was refused: wait (at
        most ``PlacementMirror.refresh_bound``) for the refresh the refusal asked for, and
        return the mirror's judgement of an allocation request on that view (None without
        a mirror or a refusal): the other schedulers' claims that made Placement refuse are
        in it, so the retry does not walk on to hosts they took already."""
        asked = self._refused.pop(consumer_uuid, None)
        mirror = self.mirror
        if mirror is None or asked is None:
            return None
        self.refusal_waits += 1
        if not await mirror.refreshed_since(asked):
            self.refusal_timeouts += 1
        return mirror.still_fits

    async def take_over(
        self,
        consumer_uuid: str,
        allocation_request: Mapping[str, Any],
        *,
        generation: int,
        project_id: str,
        user_id: str,
        before: Mapping[str, Mapping[str, int]] | None = None,
    ) -> bool:
        """An allocation already in Placement (the mirror counts it already) made ours."""
        if not isinstance(self.client, TakesOver):
            return False
        return await self.client.take_over(
            consumer_uuid,
            allocation_request,
            generation=generation,
            project_id=project_id,
            user_id=user_id,
            before=before,
        )

    async def rollback(self, consumer_uuids: Iterable[str]) -> None:
        uuids = list(consumer_uuids)
        try:
            await self.client.rollback(uuids)
        finally:
            if self.mirror is not None:
                self.mirror.note_released(uuids)

    def health(self) -> CandidatesHealth:
        serving, why = (False, "no mirror configured")
        if self.mirror is not None:
            state, why = self.mirror.serving()
            serving = state is not None
        return CandidatesHealth(
            source=MIRROR if serving else PLACEMENT,
            why_not_mirror=None if serving else why,
            paths=dict(self.paths),
            fallback_reasons=dict(self.reasons.most_common(8)),
            last_path=self.last_path,
            last_local_ms=round(self._local_ms, 2),
            get_calls=self._flight.calls,
            get_shared=self._flight.shared,
            refusal_waits=self.refusal_waits,
            refusal_timeouts=self.refusal_timeouts,
        )
