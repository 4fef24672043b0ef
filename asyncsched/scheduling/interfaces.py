"""What the scheduler needs from the host-state cache and the Placement client.

Protocols rather than the concrete classes, so the decision code can be tested over small fakes
and the chance driver and the filter scheduler share one contract.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from typing import Protocol

from asyncsched.objects.models import Aggregate, CellMapping, RequestContext, RequestSpec
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.claims import Claimer
from asyncsched.placement.query import ResourceRequest
from asyncsched.state.host_state import HostState, PlacedNumaPci


class HostCache(Protocol):
    """The parts of asyncsched.state.cache.HostStateCache the scheduler uses."""

    @property
    def hosts_epoch(self) -> int: ...
    def get_by_uuids(self, uuids: Iterable[str]) -> list[HostState]: ...
    def get_by_host_node(self, host: str, node: str | None = None) -> list[HostState]: ...
    def all_hosts(self) -> list[HostState]: ...
    def cells(self) -> list[CellMapping]: ...
    def aggregates(self) -> list[Aggregate]: ...
    async def fresh_services(self) -> None: ...
    async def begin_fresh_services(self) -> Awaitable[None]: ...
    def consume_locked(
        self,
        host: HostState,
        spec: RequestSpec,
        instance_uuid: str,
        *,
        placed: PlacedNumaPci | None = None,
    ) -> None: ...
    async def release(self, host: HostState, instance_uuid: str) -> None: ...
    async def release_many(self, consumed: Iterable[tuple[HostState, str]]) -> None: ...


class Placement(Claimer, Protocol):
    """The parts of asyncsched.placement.client.PlacementClient the scheduler uses.

    Claims and rollback are what a ClaimBatch needs (``Claimer``); the scheduler also asks
    for candidates.
    """

    async def get_allocation_candidates(self, request: ResourceRequest) -> Candidates: ...


class Notifier(Protocol):
    """Where ``scheduler.select_destinations.start``/``.end`` go; never waits, never raises."""

    def select_destinations(self, phase: str, ctx: RequestContext, spec: RequestSpec) -> None: ...
