"""The scheduler's contracts: what it needs from below, and what a decision driver is.

``HostCache``, ``Placement`` and ``Notifier`` are protocols rather than the concrete classes,
so the decision code can be tested over small fakes. ``Strategy`` is the abstract base of the
two decision drivers behind the RPC layer's SchedulerAPI (``[asyncsched] driver``, chosen in
``app.py``): the filter scheduler (``manager.SchedulerManager``) and the chance driver
(``chance.ChanceScheduler``). As in aio-pika, a subclass overrides public methods only.
"""

from __future__ import annotations

import abc
import logging
import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from typing import Protocol

from asyncsched.common.clock import utcnow
from asyncsched.common.recorder import NO_RECORDER, Recorder
from asyncsched.conf.options import Config
from asyncsched.exceptions import NoValidHost, PlacementError
from asyncsched.objects.models import (
    Aggregate,
    CellMapping,
    RequestContext,
    RequestSpec,
    Selection,
)
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.claims import Claimer
from asyncsched.placement.query import ResourceRequest
from asyncsched.scheduling.diagnostics import Diagnostics
from asyncsched.state.host_state import HostState, PlacedNumaPci

LOG = logging.getLogger(__name__)


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


class _NoNotifications:
    """nova's default (noop driver): nothing is sent."""

    def select_destinations(self, phase: str, ctx: RequestContext, spec: RequestSpec) -> None:
        return None


class Strategy(abc.ABC):
    """A decision driver: ``select_destinations`` as the RPC layer's SchedulerAPI calls it.

    The shared shell is here: nova's start/end notifications around ``decide``, what every
    driver holds (config, cache, Placement, clock, random generator, the last requests'
    diagnostics, recorder) and the candidate step both take. A
    driver implements ``decide`` (one call, NoValidHost when no host) and ``reconfigure``
    (SIGHUP; raises ConfigError and keeps the old state on a bad config).
    """

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
        self.config = config
        self.cache = cache
        self.placement = placement
        self.clock = clock
        self.rng = rng if rng is not None else random.Random()
        self.diagnostics = diagnostics if diagnostics is not None else Diagnostics()
        self.recorder = recorder
        self.notifier: Notifier = notifier if notifier is not None else _NoNotifications()

    async def select_destinations(
        self,
        ctx: RequestContext,
        spec: RequestSpec,
        instance_uuids: Sequence[str] | None,
        return_objects: bool,
        return_alternates: bool,
    ) -> list[list[Selection]]:
        """nova's _select_destinations: start notification, decide, end notification."""
        self.notifier.select_destinations("start", ctx, spec)
        result = await self.decide(ctx, spec, instance_uuids, return_objects, return_alternates)
        self.notifier.select_destinations("end", ctx, spec)
        return result

    # -- the steps both drivers take ---------------------------------------------------------

    async def allocation_candidates(
        self, request: ResourceRequest, fallback: Callable[[], ResourceRequest] | None = None
    ) -> Candidates:
        """Placement's allocation candidates for ``request`` (merged with those of
        ``fallback()`` when given, nova's PCPU fallback query); a Placement failure is
        NoValidHost, as in nova."""
        try:
            cands = await self.placement.get_allocation_candidates(request)
            if fallback is not None:
                cands = cands.merge(await self.placement.get_allocation_candidates(fallback()))
        except PlacementError as exc:
            LOG.error("Placement allocation candidates query failed: %s", exc)
            raise NoValidHost(reason="") from exc
        return cands

    # -- what a driver implements ------------------------------------------------------------

    @abc.abstractmethod
    async def decide(
        self,
        ctx: RequestContext,
        spec: RequestSpec,
        instance_uuids: Sequence[str] | None,
        return_objects: bool,
        return_alternates: bool,
    ) -> list[list[Selection]]:
        """One call's Selections (per instance: the host, then its alternates)."""

    @abc.abstractmethod
    def reconfigure(self, config: Config) -> None:
        """SIGHUP: take ``config``; on ConfigError nothing changes."""

    @abc.abstractmethod
    def plugins(self) -> tuple[list[str], list[str]]:
        """The filters and weighers this driver runs (names, in order)."""
