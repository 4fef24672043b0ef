"""The live host table: every compute node of every enabled cell, kept in memory.

Why: upstream nova rebuilds every HostState from the cell databases on each request. Here a
request never waits on a database. ``HostStateCache`` loads all cells in parallel at start, then
refreshes in the background (incremental by ``updated_at``/``created_at``/``deleted_at``
watermarks, plus a periodic full resync), and applies the RPC casts at once.

Consumption a request made (and Placement accepted) is kept on the host as an ``Assumption``
and re-applied over fresh database values until the cell DB shows the instance on that host
or ``[asyncsched] assumed_ttl`` passes. So a host's numbers are always

    DB snapshot  +  the assumptions still pending on it

which makes refresh, release and expiry the same operation (``assumptions.rebase``). For NUMA
and PCI the assumption holds what was placed (fitted guest topology, PCI requests, provider
mapping), re-applied in order over the fresh DB topology and pools; one that no longer fits is
fitted afresh or left out, logged and counted in ``health()`` (``assumed_unfit``).

Each cell and the API database refresh in their own task: a slow or dead database only makes
its own part stale (visible in ``health()``), never blocks the others or any read.

While ImagePropertiesWeigher can matter (``rows.image_props_wanted``: config multiplier non-zero
and the weigher enabled) each cell also keeps its instances' image properties from
``instance_system_metadata`` and every host gets ``extra["instance_image_props"]`` and
``extra["instance_image_prop_counts"]``; otherwise that table is never read.

This class is the façade requests use: reads, consumption and release, and ``health()``; its
``start``/``close``/``refresh``/``reconfigure`` hand over to the ``Refresher`` (``refresher``),
which owns the databases, the background loops and the API and cell passes. The five casts
are ``events`` (``events.CastEvents``), the per-request services reads ``fresh_reads``. The
SQL is in ``sql``, the readers in ``readers`` and ``images``, a cell's index and its diffing
in ``index``, the visible host table and host rebuilds in ``table``, the pending consumption
in ``assumptions``, the API-DB pass in ``api``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from asyncsched.common.lifecycle import StartClose
from asyncsched.common.pacing import Pacer
from asyncsched.common.recorder import NO_RECORDER, Recorder
from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, CellMapping, RequestSpec
from asyncsched.state import assumptions
from asyncsched.state.events import CastEvents
from asyncsched.state.fresh import FreshWait
from asyncsched.state.fresh_reads import FreshReads
from asyncsched.state.health import HostStateHealth
from asyncsched.state.host_state import HostState, PlacedNumaPci
from asyncsched.state.refresher import Refresher
from asyncsched.state.rows import image_props_wanted
from asyncsched.state.table import HostTable, Live, db_health

LOG = logging.getLogger(__name__)


class HostStateCache(StartClose):
    """In-memory HostState table of all enabled cells, refreshed in the background.

    Use as ``async with HostStateCache(config) as cache:`` or ``start()``/``close()``.
    Reads never touch a database and are O(1) per host. The casts are ``cache.events``.
    """

    name = "hoststate"

    def __init__(
        self,
        config: Config,
        *,
        clock: Callable[[], float] | None = None,
        recorder: Recorder = NO_RECORDER,
    ) -> None:
        self._clock: Callable[[], float] = clock or time.monotonic
        self.metrics: dict[str, int] = {
            "assumptions_confirmed": 0,
            "assumptions_expired": 0,
            "assumptions_released": 0,
            "assumptions_refitted": 0,  # a re-apply found the pinning taken; fitted afresh
            "assumptions_unfit": 0,  # a re-apply could not count (part of) NUMA/PCI usage
            "refresh_passes": 0,
            "full_resyncs": 0,
            "beat_sweeps": 0,  # incremental passes that read every beat (``fresh.SWEEP_MAX``)
            "pass_service_rows": 0,  # services rows applied by refresh passes
            "refresh_failures": 0,
            "image_props_reads": 0,
            "image_props_failures": 0,
            "services_fresh_reads": 0,  # per-request reads of a cell's services
            "services_fresh_failures": 0,  # ... that failed or outlasted fresh_services_wait
            "services_fresh_skipped": 0,  # a cell answered from the cache without a read
        }
        self._live = Live(config, self._clock, self.metrics, image_props_wanted(config))
        self._table = HostTable(self._live)
        self._cells = self._table.cells  # the same dict, shorter
        self.refresher = Refresher(self._table, recorder)
        self.events = CastEvents(self._table, self.refresher, self.release)
        self._fresh = FreshReads(self._table, self.refresher)

    # ---- lifecycle: the refresher's ---------------------------------------------------------

    async def start(self) -> None:
        """Full load of the API DB and every enabled cell (in parallel), then refresh tasks.

        Unreachable databases do not make this fail: their part stays empty and stale in
        ``health()`` and is retried in the background with backoff.
        """
        await self.refresher.start()

    async def close(self) -> None:
        """Stop background work and close every pool."""
        await self.refresher.close()

    def reconfigure(self, config: Config) -> None:
        """Take a new config (SIGHUP): intervals apply at the next tick, allocation-ratio
        defaults are re-applied to every host, changed DB settings reconnect."""
        self.refresher.reconfigure(config)

    async def refresh(self, *, full: bool = False) -> None:
        """One refresh pass of the API DB and every cell now (tests, SIGHUP). Never raises
        for an unavailable database: that shows in ``health()``."""
        await self.refresher.refresh(full=full)

    def health(self) -> HostStateHealth:
        """Staleness and age per database, counts, assumption metrics, last errors."""
        now = self._clock()
        refresher = self.refresher
        cells = {c.uuid: c.health(now, self._live.image_props_on) for c in self._cells.values()}
        api = db_health(refresher.api, refresher.api_loaded, now)
        stale = api.stale or any(c.stale for c in cells.values())
        ready = refresher.api_loaded and all(c.loaded for c in self._cells.values())
        # the hosts with assumptions, in one pass (100,000 hosts; health is written often)
        assumed = [h.assumed for h in self._table.by_uuid.values() if h.assumed]
        m = self.metrics
        return HostStateHealth(
            ok=ready and not stale,
            ready=ready,
            stale=stale,
            api=api,
            cells=cells,
            unusable_cells=dict(refresher.unusable_cells),
            hosts=len(self._table.by_uuid),
            aggregates=len(self._live.aggs.aggs),
            assumed=sum(map(len, assumed)),
            assumed_unfit=sum(1 for a_of in assumed for a in a_of.values() if a.conflict),
            assumptions_confirmed=m["assumptions_confirmed"],
            assumptions_expired=m["assumptions_expired"],
            assumptions_released=m["assumptions_released"],
            assumptions_refitted=m["assumptions_refitted"],
            assumptions_unfit=m["assumptions_unfit"],
            refresh_passes=m["refresh_passes"],
            full_resyncs=m["full_resyncs"],
            beat_sweeps=m["beat_sweeps"],
            pass_service_rows=m["pass_service_rows"],
            refresh_failures=m["refresh_failures"],
            image_props_reads=m["image_props_reads"],
            image_props_failures=m["image_props_failures"],
            services_fresh_reads=m["services_fresh_reads"],
            services_fresh_failures=m["services_fresh_failures"],
            services_fresh_skipped=m["services_fresh_skipped"],
        )

    # ---- reads ------------------------------------------------------------------------------

    def get_by_uuid(self, uuid: str) -> HostState | None:
        return self._table.by_uuid.get(uuid)

    @property
    def hosts_epoch(self) -> int:
        """Moves whenever a host joins or leaves: a list of hosts built before is stale."""
        return self._table.epoch

    def get_by_uuids(self, uuids: Iterable[str]) -> list[HostState]:
        """Hosts for Placement's provider-summary keys; unknown uuids (nested RPs, other
        clouds, nodes not loaded yet) are skipped."""
        get = self._table.by_uuid.get
        return [h for h in map(get, uuids) if h is not None]

    def get_by_host_node(self, host: str, node: str | None = None) -> list[HostState]:
        nodes = self._table.by_host.get(host)
        if not nodes:
            return []
        if node is None:
            return list(nodes.values())
        hs = nodes.get(node)
        return [] if hs is None else [hs]

    def hosts_in_cell(self, cell_uuid: str) -> list[HostState]:
        cell = self._cells.get(cell_uuid)
        return [] if cell is None else list(cell.table.values())

    def all_hosts(self) -> list[HostState]:
        return list(self._table.by_uuid.values())

    def cells(self) -> list[CellMapping]:
        """Enabled cells, cell0 excluded."""
        return [c.mapping for c in self._cells.values()]

    def aggregates(self) -> list[Aggregate]:
        return list(self._live.aggs.aggs.values())

    def aggregates_for_host(self, host: str) -> tuple[Aggregate, ...]:
        return self._live.aggs.host_aggs.get(host, ())

    def cell_of_host(self, host: str) -> str | None:
        """Cell uuid of a service host (host_mappings, else where its service row is)."""
        return self.refresher.cell_of_host(host)

    def is_stale(self, cell_uuid: str) -> bool:
        cell = self._cells.get(cell_uuid)
        return cell is None or cell.db.failures > 0 or not cell.loaded

    async def fresh_services(self) -> None:
        """Make each cell's services (disabled, forced down, last seen up) as fresh as the
        request calling this: wait, at most ``[asyncsched] fresh_services_wait``, for a read
        of each cell's ``services`` that started after the call (shared by the requests
        that arrive together; see ``state.fresh``). A cell that is down, failing or slow is
        answered from the cached state; this never raises."""
        await (await self.begin_fresh_services())

    async def begin_fresh_services(self) -> FreshWait:
        """``fresh_services`` in two steps: start the reads (their queries are sent before
        this returns), do other work meanwhile (Placement's answer), then await the result
        (never raises); left unawaited, the reads still complete and apply."""
        return await self._fresh.begin()

    # ---- consumption ----------------------------------------------------------------------

    async def consume(
        self,
        host: HostState,
        spec: RequestSpec,
        instance_uuid: str,
        *,
        placed: PlacedNumaPci | None = None,
    ) -> None:
        """Apply one instance's consumption under ``host.lock`` and keep it as an assumption.

        The caller must not hold ``host.lock`` (asyncio locks are not re-entrant); a caller
        that does uses ``consume_locked``.
        """
        async with host.lock:
            self.consume_locked(host, spec, instance_uuid, placed=placed)

    def consume_locked(
        self,
        host: HostState,
        spec: RequestSpec,
        instance_uuid: str,
        *,
        placed: PlacedNumaPci | None = None,
    ) -> None:
        """``consume`` for a caller already holding ``host.lock``; nova's arithmetic.

        ``placed`` (from ``resources.numa.consume.place_numa_pci``, which already set the
        host's NUMA topology and PCI pools) is the instance's NUMA/PCI usage: it is re-applied
        over fresh DB values on every refresh and taken out on release.
        """
        assumptions.consume(
            host,
            spec,
            instance_uuid,
            placed=placed,
            now=self._clock(),
            rebase_host=self._table.rebase_host,
            metrics=self.metrics,
        )
        self._table.share_instance(host, instance_uuid)

    async def release(self, host: HostState, instance_uuid: str) -> None:
        """The claim failed (or was rolled back): undo that consumption at once."""
        async with host.lock:
            self.release_locked(host, instance_uuid)

    def release_locked(self, host: HostState, instance_uuid: str) -> None:
        """``release`` for a caller holding ``host.lock``: the host is recomputed without this
        assumption (from its DB snapshot, else from the values before the oldest pending one),
        so exactly its CPUs, pages and PCI devices come free."""
        assumptions.release(
            host, (instance_uuid,), rebase_host=self._table.rebase_host, metrics=self.metrics
        )
        self._table.unshare_instances(host, (instance_uuid,))

    async def release_many(self, consumed: Iterable[tuple[HostState, str]]) -> None:
        """``release`` of many (host, instance) pairs, each host rebuilt once: linear in the
        instances however many share a host. A failure on one host is logged; the others
        are still released."""
        by_host: dict[int, tuple[HostState, list[str]]] = {}
        for host, instance_uuid in consumed:
            by_host.setdefault(id(host), (host, []))[1].append(instance_uuid)
        pacer = Pacer()  # a host of thousands of instances is one step; many hosts are many
        for host, uuids in by_host.values():
            await pacer.tick()
            try:
                async with host.lock:
                    assumptions.release(
                        host, uuids, rebase_host=self._table.rebase_host, metrics=self.metrics
                    )
                self._table.unshare_instances(host, uuids)
            except Exception:
                LOG.exception("release failed on %s", host.nodename)
