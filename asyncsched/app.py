"""Assembly of the real daemon: which components ``asyncsched serve`` runs, in which order.

Start order is the data flow read backwards from the wire, so nothing takes a message before
what it needs is up:

0. ``admin`` (only with ``[asyncsched] admin_listen``) and ``looplag``: the admin HTTP
   endpoint first, so ``/healthz`` answers during a long initial load and ``/readyz`` can say
   "starting"; being first it closes last and keeps answering probes while the consumers
   drain; it also serves ``POST /v1/explain`` and ``GET /v1/capacity`` (dry runs of the
   scheduler, ``admin/explain_api.py``). ``looplag`` samples event-loop lag for ``/metrics``
   and the health snapshot (its ``max_s`` is the longest the loop was held since start);
1. ``hoststate``: :class:`HostStateCache`, a full load of the API database and every cell;
2. ``placement``: :class:`PlacementClient`, reachable and its microversion negotiated;
   then ``notifications`` (only when a notification driver is set), which never blocks start;
   then ``placement_mirror`` (when ``[placement_database] connection`` is set): Placement's
   providers loaded into memory, and ``candidates``, which answers from it or asks Placement;
3. ``scheduler``: the decision driver over 1 and 2, :class:`SchedulerManager` (the filter
   scheduler) or :class:`ChanceScheduler` (``[asyncsched] driver = chance``);
4. ``rpc``: :class:`RPCServer`, the AMQP consumers, calling 3 and feeding fanout casts to 1.

The :class:`~asyncsched.service.Service` stops in reverse: the consumers stop taking messages
first and their in-flight select_destinations calls still have the scheduler, Placement and
the cache while they finish. The small adapters below give the library classes a component
name and lifecycle without those packages knowing about the service shell.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry

from asyncsched.admin.explain_api import ExplainAPI
from asyncsched.admin.looplag import LoopLagMonitor
from asyncsched.admin.metrics import Metrics, build_registry
from asyncsched.admin.readiness import ReadyLimits
from asyncsched.admin.server import AdminServer, read_token, tls_context
from asyncsched.common.health import ServiceHealth, Snapshot
from asyncsched.common.systemd import SystemdNotifier
from asyncsched.conf.listen import parse_listen
from asyncsched.conf.loader import ConfigSources
from asyncsched.conf.options import Config
from asyncsched.exceptions import ConfigError, PlacementError
from asyncsched.notifications import build_notifier
from asyncsched.placement.client import PlacementClient
from asyncsched.placement.health import PlacementHealth
from asyncsched.rpc.server import RPCHealth, RPCServer
from asyncsched.scheduling.candidates import CandidateSource
from asyncsched.scheduling.candidates.guard_usage import DatabaseUsage, HoldingsReader
from asyncsched.scheduling.chance import ChanceScheduler
from asyncsched.scheduling.interfaces import Strategy
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.service import Component, Service, health_snapshot
from asyncsched.state.cache import HostStateCache
from asyncsched.state.placement_mirror import PlacementMirror

LOG = logging.getLogger(__name__)

# How long ``start()`` keeps trying an unreachable Placement before start-up fails (systemd
# then restarts us): long enough for a Placement restarting next to us, short enough that a
# wrong endpoint shows up as a failed unit rather than an eternal "starting".
PLACEMENT_START_BUDGET = 60.0
PLACEMENT_RETRY_MAX = 5.0


class PlacementComponent:
    """Lifecycle of the shared :class:`PlacementClient`: start = reachable + version agreed.

    It also runs the client's pending rollbacks: the journal of rollbacks Placement could
    not take before a restart is replayed once Placement answers, and retried until done.
    """

    name = "placement"

    def __init__(
        self,
        client: PlacementClient,
        *,
        start_budget: float = PLACEMENT_START_BUDGET,
        retry_max: float = PLACEMENT_RETRY_MAX,
    ) -> None:
        self.client = client
        self._budget = start_budget
        self._retry_max = retry_max

    async def start(self) -> None:
        """Retry with backoff within the budget; a stop request cancels the wait."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._budget
        delay = 0.25
        while True:
            try:
                await self.client.start()
                break
            except (PlacementError, aiohttp.ClientError, OSError, TimeoutError) as exc:
                left = deadline - loop.time()
                if left <= 0:
                    await self.client.close()
                    raise PlacementError(
                        f"Placement at {self.client.endpoint} not usable after "
                        f"{self._budget:g} s: {exc}"
                    ) from exc
                LOG.warning(
                    "Placement at %s not usable yet (%s); retrying in %.1f s",
                    self.client.endpoint,
                    exc,
                    min(delay, left),
                )
                await asyncio.sleep(min(delay, left))
                delay = min(delay * 2, self._retry_max)
        if self.client.pending is not None:
            await self.client.pending.start()

    async def close(self) -> None:
        if self.client.pending is not None:
            await self.client.pending.close()  # what is left stays journaled
        await self.client.close()

    def health(self) -> PlacementHealth:
        return self.client.health()


@dataclass(frozen=True, slots=True)
class SchedulerHealth(Snapshot):
    """``SchedulerComponent.health()``: what decides, and what it decided lately."""

    driver: str
    filters: list[str]
    weighers: list[str]
    host_subset_size: int
    hosts: int
    host_state_stale: bool
    recent_outcomes: dict[str, int]
    last_request: str | None
    recent_failures: list[str]


class SchedulerComponent:
    """The decision maker as a component: SIGHUP reaches it, health shows what it decided.

    The manager holds no connections of its own (it uses the cache and the Placement client,
    which are components before it), so start/close only log.
    """

    name = "scheduler"

    def __init__(self, manager: Strategy, cache: HostStateCache) -> None:
        self.manager = manager
        self._cache = cache

    async def start(self) -> None:
        filters, weighers = self.manager.plugins()
        LOG.info(
            "scheduler: driver %s; filters %s; weighers %s",
            self.manager.config.asyncsched.driver,
            filters,
            weighers,
        )

    async def close(self) -> None:
        return None

    def reconfigure(self, config: Config) -> None:
        """New filters/weighers/multipliers/subset size; a bad list keeps the old ones."""
        self.manager.reconfigure(config)

    def health(self) -> SchedulerHealth:
        recent = self.manager.diagnostics.recent()
        outcomes = Counter(s.outcome.split(":", 1)[0] for s in recent)
        cache = self._cache.health()
        last = recent[-1] if recent else None
        filters, weighers = self.manager.plugins()
        return SchedulerHealth(
            driver=self.manager.config.asyncsched.driver,
            filters=filters,
            weighers=weighers,
            host_subset_size=self.manager.config.filter_scheduler.host_subset_size,
            hosts=cache.hosts,
            # Decisions are made from the cache: when a database is unreachable they go on
            # from the last good state, and this says so.
            host_state_stale=cache.stale,
            recent_outcomes=dict(outcomes),
            last_request=None if last is None else last.line(),
            recent_failures=[f"{s.request_id}: {s.line()}" for s in recent if s.outcome != "ok"][
                -5:
            ],
        )


class RPCComponent:
    """The AMQP consumers; drain = stop consuming, let in-flight calls reply."""

    name = "rpc"

    def __init__(self, server: RPCServer) -> None:
        self.server = server

    async def start(self) -> None:
        await self.server.start()

    async def drain(self, timeout: float) -> None:  # noqa: ASYNC109 (a budget, not a wait)
        await self.server.drain(timeout)

    async def close(self) -> None:
        await self.server.close()

    def health(self) -> RPCHealth:
        return self.server.health()


@dataclass(frozen=True, slots=True)
class Daemon:
    """The wired parts of one asyncsched process (tests and tools reach inside through it)."""

    cache: HostStateCache
    placement: PlacementClient
    manager: Strategy
    rpc: RPCServer
    components: tuple[Component, ...]
    registry: CollectorRegistry
    metrics: Metrics
    admin: AdminServer | None = None
    candidates: CandidateSource | None = None
    mirror: PlacementMirror | None = None


def build_daemon(
    config: Config,
    *,
    health: Callable[[], ServiceHealth] | None = None,
    extra_routes: Sequence[web.RouteDef] = (),
) -> Daemon:
    """Construct (not start) every part; raises ConfigError for options no part can run with.

    ``health`` is what the admin endpoint reports, judges readiness by and the metrics
    collector reads (the Service's snapshot); without it, a snapshot of the components.
    Every layer records into one :class:`Metrics` on the daemon's own registry.
    """
    if not config.api_database.connection:
        raise ConfigError(
            "[api_database] connection is required: cells, host mappings and aggregates "
            "are read from the nova API database"
        )
    if config.scheduler.query_placement_for_routed_network_aggregates:
        # Ignoring it would silently place instances on hosts outside their network segment.
        raise ConfigError(
            "[scheduler] query_placement_for_routed_network_aggregates = True needs Neutron "
            "segment lookups, which asyncsched does not make; set it to False (or keep "
            "nova-scheduler for routed-network clouds)"
        )
    # The snapshot is only read at scrape/probe time, when ``components`` exists.
    snapshot = health if health is not None else (lambda: health_snapshot("running", components))
    registry, metrics = build_registry(snapshot)
    cache = HostStateCache(config, recorder=metrics)
    placement = PlacementClient.from_config(config, recorder=metrics)
    mirror = PlacementMirror.from_config(config)
    candidates = CandidateSource(  # the mirror, else the shared GET
        placement,
        mirror,
        services_judge=any(
            n.rsplit(".", 1)[-1] == "ComputeFilter" for n in config.filter_scheduler.enabled_filters
        ),
    )
    pdb_url = config.placement_database.connection
    if mirror is not None and pdb_url and placement.guard is not None:  # confirmed from its DB
        # with the write order there, which lets racing guards agree on who backs out
        ranks = HoldingsReader(pdb_url, timeout=config.asyncsched.db_query_timeout)
        placement.guard.usages = DatabaseUsage(mirror.usage, placement, ranks)
    notifier = build_notifier(config)  # driver and transport URL: ConfigError
    # loads filters/weighers: ConfigError
    driver = ChanceScheduler if config.asyncsched.driver == "chance" else SchedulerManager
    manager = driver(config, cache, candidates, recorder=metrics, notifier=notifier)
    rpc = RPCServer(config, manager, cache.events, recorder=metrics)
    # The notifier is a component only when it sends: it closes after the scheduler, so the
    # .end notifications of the calls drained at SIGTERM still go out.
    components: tuple[Component, ...] = (
        cache,
        PlacementComponent(placement),
        *((mirror, candidates) if mirror is not None else ()),
        *((notifier,) if notifier.enabled else ()),
        SchedulerComponent(manager, cache),
        RPCComponent(rpc),
    )
    admin = None
    if config.asyncsched.admin_listen:
        admin = AdminServer(
            parse_listen(config.asyncsched.admin_listen),
            health=snapshot,
            limits=ReadyLimits(max_state_age=config.asyncsched.ready_max_state_age),
            registry=registry,
            token=read_token(config.asyncsched.admin_token_file),
            placement_probe=placement.ping,
            placement_timeout=config.asyncsched.ready_placement_timeout,
            extra_routes=[*extra_routes, *ExplainAPI(manager).routes()],
            tls=tls_context(config.asyncsched.admin_cert_file, config.asyncsched.admin_key_file),
        )
    components = (
        *((admin,) if admin is not None else ()),
        LoopLagMonitor(metrics.loop_lag.observe, observe_gc=metrics.gc_paused),
        *components,
    )
    return Daemon(
        cache, placement, manager, rpc, components, registry, metrics, admin, candidates, mirror
    )


def build_components(config: Config) -> list[Component]:
    """The daemon's components in start order: [admin,] host state, Placement, scheduler, RPC."""
    return list(build_daemon(config).components)


def build_service(
    config: Config,
    sources: ConfigSources,
    notifier: SystemdNotifier | None = None,
) -> Service:
    """The Service ``asyncsched serve`` runs: real components, notifier from the environment.

    The admin endpoint reports the Service's own snapshot (its state included); it is only
    called once the Service below exists and has started the endpoint.
    """
    daemon = build_daemon(config, health=lambda: service.health())
    service = Service(
        config,
        daemon.components,
        notifier if notifier is not None else SystemdNotifier.from_env(),
        sources,
        freeze_gc=True,
    )
    return service
