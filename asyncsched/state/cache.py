"""The live host table: every compute node of every enabled cell, kept in memory.

Why: upstream nova rebuilds every HostState from the cell databases on each request. Here a
request never waits on a database. ``HostStateCache`` loads all cells in parallel at start, then
refreshes in the background (incremental by ``updated_at``/``created_at``/``deleted_at``
watermarks, plus a periodic full resync), and applies the RPC casts at once.

Consumption a request made (and Placement accepted) is kept on the host as an ``Assumption``
and re-applied over fresh database values until the cell DB shows the instance on that host
or ``[asyncsched] assumed_ttl`` passes. So a host's numbers are always

    DB snapshot  +  the assumptions still pending on it

which makes refresh, release and expiry the same operation (``_rebase``). For NUMA and PCI
the assumption holds what was placed (fitted guest topology, PCI requests, provider mapping),
re-applied in order over the fresh DB topology and pools; one that no longer fits is fitted
afresh or left out, logged and counted in ``health()`` (``assumed_unfit``).

Each cell and the API database refresh in their own task: a slow or dead database only makes
its own part stale (visible in ``health()``), never blocks the others or any read.

While ImagePropertiesWeigher can matter (``rows.image_props_wanted``: config multiplier non-zero
and the weigher enabled) each cell also keeps its instances' image properties from
``instance_system_metadata`` and every host gets ``extra["instance_image_props"]`` and
``extra["instance_image_prop_counts"]``; otherwise that table is never read.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from types import MappingProxyType, TracebackType
from typing import Any

from asyncsched.conf.options import Config
from asyncsched.exceptions import ConfigError, DatabaseUnavailable
from asyncsched.objects.host_resources import HostNUMATopology, PciDevicePool
from asyncsched.objects.models import Aggregate, CellMapping, RequestSpec
from asyncsched.resources.numa.consume import reapply_placed
from asyncsched.state.db import NovaDatabase
from asyncsched.state.host_state import Assumption, HostState, PlacedNumaPci, ServiceInfo
from asyncsched.state.rows import (
    IMAGE_PROP_COUNTS_KEY,
    IMAGE_PROPS_KEY,
    NodeSnapshot,
    image_prop_counts,
    image_props_from_system_metadata,
    image_props_wanted,
    node_snapshot,
    resolve_ratios,
    service_info,
)

LOG = logging.getLogger(__name__)

CELL0_UUID = "00000000-0000-0000-0000-000000000000"
# Rows changed this long before the previous pass's start are read again: covers clock skew
# between computes and the DB and transactions that committed late. Re-reading is idempotent.
WATERMARK_OVERLAP = timedelta(seconds=15)
CHUNK = 256  # rows parsed / hosts applied between yields to the event loop

_NODE_COLS = (
    "id, uuid, host, hypervisor_hostname, vcpus, vcpus_used, memory_mb, free_ram_mb, local_gb,"
    " local_gb_used, free_disk_gb, disk_available_least, hypervisor_type, hypervisor_version,"
    " host_ip, cpu_info, supported_instances, numa_topology, pci_stats, metrics, stats,"
    " cpu_allocation_ratio, ram_allocation_ratio, disk_allocation_ratio, created_at,"
    " updated_at, deleted"
)
_SVC_COLS = (
    'id, uuid, host, "binary", disabled, disabled_reason, forced_down, last_seen_up,'
    " created_at, updated_at, version, deleted"
)
_CHANGED = "(updated_at >= $3 OR created_at >= $3 OR deleted_at >= $3)"
_PAGE = "AND id > $1 ORDER BY id LIMIT $2"  # keyset pages: no huge result decoded at once

SQL_NOW = "SELECT (now() AT TIME ZONE 'utc') AS now"
SQL_NODES_ALL = f"SELECT {_NODE_COLS} FROM compute_nodes WHERE deleted = 0 {_PAGE}"
SQL_NODES_CHANGED = f"SELECT {_NODE_COLS} FROM compute_nodes WHERE {_CHANGED} {_PAGE}"
SQL_SERVICES_ALL = (
    f"SELECT {_SVC_COLS} FROM services WHERE \"binary\" = 'nova-compute' AND deleted = 0"
)
SQL_SERVICES_CHANGED = (
    f"SELECT {_SVC_COLS} FROM services WHERE \"binary\" = 'nova-compute'"
    " AND (updated_at >= $1 OR created_at >= $1 OR deleted_at >= $1)"
)
SQL_INSTANCES_ALL = (
    f"SELECT id, uuid, host FROM instances WHERE deleted = 0 AND host IS NOT NULL {_PAGE}"
)
SQL_INSTANCES_CHANGED = f"SELECT id, uuid, host, deleted FROM instances WHERE {_CHANGED} {_PAGE}"
NODE_PAGE = 500
INSTANCE_PAGE = 20000
SQL_INSTANCES_OF_HOST = "SELECT uuid FROM instances WHERE host = $1 AND deleted = 0"

# Instances' image properties (ImagePropertiesWeigher), read only while it can matter. nova
# hard-deletes system-metadata keys an update drops, so an instance is re-read whole whenever
# its instances row or any of its image_* rows changed; the full resync catches the rest.
# One row per instance, its image_* rows folded by PostgreSQL into one key-ordered string
# (key US value RS ...): ten times fewer rows to decode, and identical images give identical
# strings, parsed once. Keyset pages walk nova's instance_uuid index.
_IMAGE_KEYS = "key LIKE 'image\\_%' AND value IS NOT NULL AND deleted = 0"
_KV = "string_agg(key || chr(31) || value, chr(30) ORDER BY key) AS kv"
SQL_SYSMETA_ALL = (
    f"SELECT instance_uuid, {_KV} FROM instance_system_metadata"
    f" WHERE {_IMAGE_KEYS} AND instance_uuid > $1"
    " GROUP BY instance_uuid ORDER BY instance_uuid LIMIT $2"
)
SQL_SYSMETA_CHANGED = (
    "SELECT DISTINCT instance_uuid FROM instance_system_metadata WHERE key LIKE 'image\\_%'"
    " AND (updated_at >= $1 OR created_at >= $1 OR deleted_at >= $1)"
)
SQL_SYSMETA_OF = (
    f"SELECT instance_uuid, {_KV} FROM instance_system_metadata"
    f" WHERE {_IMAGE_KEYS} AND instance_uuid = ANY($1::varchar[]) GROUP BY instance_uuid"
)
SYSMETA_PAGE = 5000  # instances per page
SYSMETA_BATCH = 1000  # instance uuids per ANY() query

SQL_API_FINGERPRINT = """
SELECT
 (SELECT count(*)::text || '/' || coalesce(max(greatest(created_at, updated_at))::text, '')
    FROM cell_mappings) AS cells,
 (SELECT count(*)::text || '/' || coalesce(max(greatest(created_at, updated_at))::text, '')
    || '/' || coalesce(sum(id)::text, '') FROM host_mappings) AS hosts,
 (SELECT count(*)::text || '/' || coalesce(max(greatest(created_at, updated_at))::text, '')
    || '/' || coalesce(sum(id)::text, '') FROM aggregates) AS aggs,
 (SELECT count(*)::text || '/' || coalesce(max(greatest(created_at, updated_at))::text, '')
    || '/' || coalesce(sum(id)::text, '') FROM aggregate_hosts) AS agg_hosts,
 (SELECT count(*)::text || '/' || coalesce(max(greatest(created_at, updated_at))::text, '')
    || '/' || coalesce(sum(id)::text, '') FROM aggregate_metadata) AS agg_meta
"""
SQL_CELLS = "SELECT id, uuid, name, database_connection, disabled FROM cell_mappings ORDER BY id"
SQL_HOST_MAPPINGS = (
    "SELECT h.host, c.uuid FROM host_mappings h JOIN cell_mappings c ON c.id = h.cell_id"
)
SQL_AGGREGATES = "SELECT id, uuid, name FROM aggregates ORDER BY id"
SQL_AGGREGATE_HOSTS = "SELECT aggregate_id, host FROM aggregate_hosts ORDER BY id"
SQL_AGGREGATE_METADATA = "SELECT aggregate_id, key, value FROM aggregate_metadata ORDER BY id"


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(eq=False)
class _NodeRead:
    """What one read of compute_nodes found."""

    snaps: dict[str, NodeSnapshot] = field(default_factory=dict)  # live, parsed or reused
    sigs: dict[str, int] = field(default_factory=dict)  # signatures of newly parsed rows
    live: set[str] = field(default_factory=set)  # every live uuid, parsed or not
    deleted: set[str] = field(default_factory=set)


ImageProps = Mapping[str, str]


def _split_kv(kv: str) -> list[tuple[str, str | None]]:
    """The folded ``key US value RS ...`` string of SQL_SYSMETA_* back into rows."""
    out: list[tuple[str, str | None]] = []
    for item in kv.split("\x1e"):
        key, _, value = item.partition("\x1f")
        out.append((key, value))
    return out


@dataclass(eq=False)
class _PropsRead:
    """What one read of instance_system_metadata found: parsed (shared) image properties by
    instance; ``uuids`` the instances re-read (None: everything, a full read)."""

    props: dict[str, ImageProps]
    uuids: set[str] | None


@dataclass(eq=False)
class _PropsPool:
    """Parsed image properties shared between instances: thousands of instances use a
    handful of images, so each distinct set of rows is parsed and stored once."""

    by_raw: dict[str, ImageProps] = field(default_factory=dict)
    by_value: dict[frozenset[tuple[str, str]], ImageProps] = field(default_factory=dict)

    def parse(self, raw: str, reuse: _PropsPool | None = None) -> ImageProps:
        """One instance's folded rows -> its shared parsed properties."""
        got = self.by_raw.get(raw)
        if got is None and reuse is not None:
            got = reuse.by_raw.get(raw)
        if got is None:
            parsed = image_props_from_system_metadata(_split_kv(raw))
            key = frozenset(parsed.items())
            got = self.by_value.get(key)
            if got is None and reuse is not None:
                got = reuse.by_value.get(key)
            if got is None:
                got = MappingProxyType(parsed)
            self.by_value[key] = got
        self.by_raw[raw] = got
        return got


@dataclass(eq=False)
class _Cell:
    """Everything the cache knows about one cell; mutated only by the cache."""

    mapping: CellMapping
    db: NovaDatabase
    snaps: dict[str, NodeSnapshot] = field(default_factory=dict)  # node uuid -> snapshot
    sigs: dict[str, int] = field(default_factory=dict)  # node uuid -> hash of its raw row
    nodes_by_host: dict[str, set[str]] = field(default_factory=dict)
    services: dict[str, ServiceInfo] = field(default_factory=dict)  # host -> nova-compute
    host_insts: dict[str, set[str]] = field(default_factory=dict)  # host -> instance uuids
    inst_host: dict[str, str] = field(default_factory=dict)  # instance uuid -> host
    table: dict[str, HostState] = field(default_factory=dict)  # visible hosts of this cell
    watermark: datetime | None = None  # naive UTC, DB clock
    loaded: bool = False
    last_full: float | None = None
    last_refresh: float | None = None
    warned_no_service: set[str] = field(default_factory=set)
    # instance uuid -> image properties (only instances on a host, only while wanted)
    image_props: dict[str, ImageProps] = field(default_factory=dict)
    image_pool: _PropsPool = field(default_factory=_PropsPool)
    image_props_full_needed: bool = True  # next pass reads them all (first, after an error)
    image_props_loaded: bool = False  # a full read succeeded since they were wanted
    image_props_error: str | None = None
    pass_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: asyncio.Task[None] | None = None

    @property
    def uuid(self) -> str:
        return self.mapping.uuid


class HostStateCache:
    """In-memory HostState table of all enabled cells, refreshed in the background.

    Use as ``async with HostStateCache(config) as cache:`` or ``start()``/``close()``.
    Reads never touch a database and are O(1) per host.
    """

    name = "hoststate"

    def __init__(self, config: Config, *, clock: Callable[[], float] | None = None) -> None:
        self._config = config
        self._clock: Callable[[], float] = clock or time.monotonic
        self._rng = random.Random()
        self._api: NovaDatabase | None = None
        self._api_fp: dict[str, str] = {}
        self._api_lock = asyncio.Lock()
        self._api_loaded = False
        self._api_last_full: float | None = None
        self._cells: dict[str, _Cell] = {}
        self._by_uuid: dict[str, HostState] = {}
        self._by_host: dict[str, dict[str, HostState]] = {}
        self._host_cell: dict[str, str] = {}  # host_mappings: host -> cell uuid
        self._aggs: dict[int, Aggregate] = {}
        self._agg_hosts: dict[int, frozenset[str]] = {}
        self._host_aggs: dict[str, tuple[Aggregate, ...]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._api_task: asyncio.Task[None] | None = None
        self._started = False
        self._running = False  # start() finished its initial load; loops are running
        self._closed = False
        self._image_props_on = image_props_wanted(config)
        self.metrics: dict[str, int] = {
            "assumptions_confirmed": 0,
            "assumptions_expired": 0,
            "assumptions_released": 0,
            "assumptions_refitted": 0,  # a re-apply found the pinning taken; fitted afresh
            "assumptions_unfit": 0,  # a re-apply could not count (part of) NUMA/PCI usage
            "refresh_passes": 0,
            "full_resyncs": 0,
            "refresh_failures": 0,
            "image_props_reads": 0,
            "image_props_failures": 0,
        }

    # ---- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> HostStateCache:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Full load of the API DB and every enabled cell (in parallel), then refresh tasks.

        Unreachable databases do not make this fail: their part stays empty and stale in
        ``health()`` and is retried in the background with backoff.
        """
        if self._started:
            return
        url = self._config.api_database.connection
        if not url:
            raise ConfigError("[api_database] connection is required by the host-state cache")
        self._api = self._new_db("api", url)
        self._started = True
        await self._api_pass(full=True)
        await asyncio.gather(*(self._cell_pass(c, full=True) for c in list(self._cells.values())))
        # The big load leaves the cyclic GC owing a full collection that would otherwise hit
        # a request later (~0.3 s at 10,000 hosts); pay it now, before the service is ready.
        gc.collect()
        self._running = True
        self._api_task = self._spawn(self._api_loop())
        for cell in self._cells.values():
            self._start_cell_loop(cell)

    async def close(self) -> None:
        """Stop background work and close every pool."""
        self._closed = True
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        dbs = [c.db for c in self._cells.values()]
        if self._api is not None:
            dbs.append(self._api)
        await asyncio.gather(*(db.close() for db in dbs), return_exceptions=True)

    def reconfigure(self, config: Config) -> None:
        """Take a new config (SIGHUP): intervals apply at the next tick, allocation-ratio
        defaults are re-applied to every host, changed DB settings reconnect."""
        old, self._config = self._config, config
        a, b = old.asyncsched, config.asyncsched
        db_changed = (a.db_pool_size, a.db_query_timeout, a.db_reconnect_max) != (
            b.db_pool_size,
            b.db_query_timeout,
            b.db_reconnect_max,
        )
        if self._api is not None and (
            db_changed or config.api_database.connection != old.api_database.connection
        ):
            old_api = self._api
            if config.api_database.connection:
                self._api = self._new_db("api", config.api_database.connection)
                self._api_fp = {}
            self._spawn(old_api.close())
        if db_changed:
            for cell in self._cells.values():
                old_db = cell.db
                cell.db = self._new_db(old_db.name, old_db.url)
                self._spawn(old_db.close())
        if old.default != config.default and self._started:
            self._spawn(self._reapply_all())
        wanted = image_props_wanted(config)
        if wanted != self._image_props_on:
            self._image_props_on = wanted
            LOG.info(
                "instances' image properties %s (ImagePropertiesWeigher %s)",
                "will be loaded" if wanted else "dropped",
                "enabled" if wanted else "off",
            )
            for cell in self._cells.values():
                cell.image_props = {}
                cell.image_pool = _PropsPool()
                cell.image_props_full_needed = True
                cell.image_props_loaded = False
                cell.image_props_error = None
            if self._started:
                if wanted:  # load now rather than at the next tick
                    for cell in list(self._cells.values()):
                        self._spawn(self._guarded(self._cell_pass(cell, full=False)))
                else:
                    self._spawn(self._reapply_all())

    async def refresh(self, *, full: bool = False) -> None:
        """One refresh pass of the API DB and every cell now (tests, SIGHUP). Never raises
        for an unavailable database: that shows in ``health()``."""
        if not self._started:
            raise RuntimeError("HostStateCache.refresh() before start()")
        await self._api_pass(full=full)
        await asyncio.gather(*(self._cell_pass(c, full=full) for c in list(self._cells.values())))

    def health(self) -> dict[str, Any]:
        """Staleness and age per database, counts, assumption metrics, last errors."""
        now = self._clock()

        def db_health(db: NovaDatabase | None, loaded: bool) -> dict[str, Any]:
            if db is None:
                return {"stale": True, "age": None, "loaded": False, "last_error": None}
            return {
                "stale": db.failures > 0 or not loaded,
                "age": None if db.last_ok is None else round(now - db.last_ok, 3),
                "loaded": loaded,
                "consecutive_failures": db.failures,
                "down_for": None if db.failed_since is None else round(now - db.failed_since, 3),
                "retry_in": round(db.retry_delay, 3),
                "last_error": db.last_error,
            }

        cells = {}
        for cell in self._cells.values():
            h = db_health(cell.db, cell.loaded)
            h.update(
                name=cell.mapping.name,
                hosts=len(cell.table),
                last_full_age=None if cell.last_full is None else round(now - cell.last_full, 3),
                image_props={
                    "wanted": self._image_props_on,
                    "loaded": cell.image_props_loaded,
                    "instances": len(cell.image_props),
                    "images": len(cell.image_pool.by_value),
                    "last_error": cell.image_props_error,
                },
            )
            cells[cell.uuid] = h
        api = db_health(self._api, self._api_loaded)
        stale = api["stale"] or any(c["stale"] for c in cells.values())
        ready = self._api_loaded and all(c.loaded for c in self._cells.values())
        return {
            "ok": ready and not stale,
            "ready": ready,
            "stale": stale,
            "api": api,
            "cells": cells,
            "hosts": len(self._by_uuid),
            "aggregates": len(self._aggs),
            "assumed": sum(len(h.assumed) for h in self._by_uuid.values()),
            "assumed_unfit": sum(
                1 for h in self._by_uuid.values() for a in h.assumed.values() if a.conflict
            ),
            **self.metrics,
        }

    # ---- reads ------------------------------------------------------------------------------

    def get_by_uuid(self, uuid: str) -> HostState | None:
        return self._by_uuid.get(uuid)

    def get_by_uuids(self, uuids: Iterable[str]) -> list[HostState]:
        """Hosts for Placement's provider-summary keys; unknown uuids (nested RPs, other
        clouds, nodes not loaded yet) are skipped."""
        get = self._by_uuid.get
        return [h for h in map(get, uuids) if h is not None]

    def get_by_host_node(self, host: str, node: str | None = None) -> list[HostState]:
        nodes = self._by_host.get(host)
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
        return list(self._by_uuid.values())

    def cells(self) -> list[CellMapping]:
        """Enabled cells, cell0 excluded."""
        return [c.mapping for c in self._cells.values()]

    def aggregates(self) -> list[Aggregate]:
        return list(self._aggs.values())

    def aggregates_for_host(self, host: str) -> tuple[Aggregate, ...]:
        return self._host_aggs.get(host, ())

    def cell_of_host(self, host: str) -> str | None:
        """Cell uuid of a service host (host_mappings, else where its service row is)."""
        cell = self._host_cell.get(host)
        if cell is not None:
            return cell
        for c in self._cells.values():
            if host in c.services:
                return c.uuid
        return None

    def is_stale(self, cell_uuid: str) -> bool:
        cell = self._cells.get(cell_uuid)
        return cell is None or cell.db.failures > 0 or not cell.loaded

    # ---- consumption ----------------------------------------------------------------------

    async def consume(
        self,
        host: HostState,
        spec: RequestSpec,
        instance_uuid: str,
        *,
        numa_topology: HostNUMATopology | None = None,
        pci_pools: tuple[PciDevicePool, ...] | None = None,
        placed: PlacedNumaPci | None = None,
    ) -> None:
        """Apply one instance's consumption under ``host.lock`` and keep it as an assumption.

        The caller must not hold ``host.lock`` (asyncio locks are not re-entrant); a caller
        that does uses ``consume_locked``.
        """
        async with host.lock:
            self.consume_locked(
                host,
                spec,
                instance_uuid,
                numa_topology=numa_topology,
                pci_pools=pci_pools,
                placed=placed,
            )

    def consume_locked(
        self,
        host: HostState,
        spec: RequestSpec,
        instance_uuid: str,
        *,
        numa_topology: HostNUMATopology | None = None,
        pci_pools: tuple[PciDevicePool, ...] | None = None,
        placed: PlacedNumaPci | None = None,
    ) -> None:
        """``consume`` for a caller already holding ``host.lock``; nova's arithmetic.

        ``placed`` (from ``resources.numa.consume.place_numa_pci``, which already set the
        host's NUMA topology and PCI pools) is the instance's NUMA/PCI usage: it is re-applied
        over fresh DB values on every refresh and taken out on release. ``numa_topology`` /
        ``pci_pools`` alone (legacy) are the host's values after the consume, put back as they
        are on every refresh; ignored when ``placed`` is given.
        """
        flavor = spec.flavor
        if placed is not None and placed.empty:
            placed = None
        after = placed
        if placed is not None:  # the "after" values go stale at the next rebuild: not kept
            placed = replace(placed, numa_after=None, pci_after=None)
        a = Assumption(
            instance_uuid=instance_uuid,
            memory_mb=int(flavor.memory_mb),
            disk_mb=int(flavor.root_gb + flavor.ephemeral_gb) * 1024,
            vcpus=int(flavor.vcpus),
            created=self._clock(),
            numa_topology=numa_topology if placed is None else None,
            pci_pools=pci_pools if placed is None else None,
            placed=placed,
        )
        prev = host.assumed.get(instance_uuid)
        host.assumed[instance_uuid] = a
        if prev is None:
            _apply_assumption(host, a)
            if after is not None:
                if after.numa_after is not None:
                    host.numa_topology = after.numa_after
                if after.pci_after is not None:
                    host.pci_pools = after.pci_after
            else:
                _apply_legacy(host, a)
        elif not self._rebase_host(host):  # the same instance again: count it once
            _unapply_assumption(host, prev)
            _apply_assumption(host, a)
            self._rebuild_without_snapshot(host, also=prev)
        host.instances.add(instance_uuid)
        host.updated = _utcnow()
        host.touch()

    async def release(self, host: HostState, instance_uuid: str) -> None:
        """The claim failed (or was rolled back): undo that consumption at once."""
        async with host.lock:
            self.release_locked(host, instance_uuid)

    def release_locked(self, host: HostState, instance_uuid: str) -> None:
        """``release`` for a caller holding ``host.lock``: the host is recomputed without this
        assumption (from its DB snapshot, else from the values before the oldest pending one),
        so exactly its CPUs, pages and PCI devices come free."""
        a = host.assumed.pop(instance_uuid, None)
        if a is None:
            return
        self.metrics["assumptions_released"] += 1
        if not self._rebase_host(host):  # not in the table: undo the arithmetic by hand
            _unapply_assumption(host, a)
            self._rebuild_without_snapshot(host, also=a)
            host.instances.discard(instance_uuid)
        host.touch()

    def _rebuild_without_snapshot(self, hs: HostState, *, also: Assumption) -> None:
        """NUMA/PCI of a host with no DB snapshot: the values before the oldest pending (or
        just removed) assumption that carries them, plus the pending ones re-applied."""
        chain = sorted([*hs.assumed.values(), also], key=lambda x: x.created)
        for x in chain:
            p = x.placed
            if p is not None:
                pools = p.pci_before if p.pci_before is not None else hs.pci_pools
                self._rebuild_numa_pci(hs, p.numa_before, pools)
                return
        if also.placed is None and (also.numa_topology is not None or also.pci_pools is not None):
            LOG.warning(
                "host %s has no DB snapshot: NUMA/PCI values kept for released instance %s",
                hs.nodename,
                also.instance_uuid,
            )

    def _rebuild_numa_pci(
        self,
        hs: HostState,
        topo: HostNUMATopology | None,
        pools: tuple[PciDevicePool, ...],
    ) -> None:
        """``hs`` NUMA topology and PCI pools = base values + each pending assumption applied
        in order (caller holds ``hs.lock``). Each assumption's ``numa_before``/``pci_before``
        is kept equal to the values just before it in this chain."""
        for a in sorted(hs.assumed.values(), key=lambda x: x.created):
            p = a.placed
            if p is None:  # legacy: the host values after that consume
                if a.numa_topology is not None:
                    topo = a.numa_topology
                if a.pci_pools is not None:
                    pools = a.pci_pools
                continue
            r = reapply_placed(p, topo, pools)
            if r.refitted:
                self.metrics["assumptions_refitted"] += 1
                LOG.warning(
                    "pinning of pending instance %s no longer fits %s; fitted it afresh",
                    a.instance_uuid,
                    hs.nodename,
                )
            if r.conflict != a.conflict:
                if r.conflict is None:
                    LOG.info(
                        "pending NUMA/PCI usage of instance %s fits %s again",
                        a.instance_uuid,
                        hs.nodename,
                    )
                else:
                    self.metrics["assumptions_unfit"] += 1
                    LOG.warning(
                        "pending NUMA/PCI usage of instance %s does not fit %s (%s);"
                        " not counted until it does",
                        a.instance_uuid,
                        hs.nodename,
                        r.conflict,
                    )
            if (
                r.fitted is not p.fitted
                or p.numa_before is not topo
                or p.pci_before is not pools
                or r.conflict != a.conflict
            ):
                a = replace(
                    a,
                    conflict=r.conflict,
                    placed=replace(p, fitted=r.fitted, numa_before=topo, pci_before=pools),
                )
                hs.assumed[a.instance_uuid] = a
            topo, pools = r.numa_topology, r.pci_pools
        hs.numa_topology = topo
        hs.pci_pools = pools

    # ---- HostStateEvents: the RPC casts ---------------------------------------------------

    async def update_aggregates(self, aggregates: Sequence[Aggregate]) -> None:
        """nova's semantics: replace each aggregate, add its id to the listed hosts and drop
        it from hosts no longer listed."""
        touched: set[str] = set()
        for agg in aggregates:
            touched |= self._agg_hosts.get(agg.id, frozenset())
            touched |= set(agg.hosts)
            self._aggs[agg.id] = agg
            self._agg_hosts[agg.id] = frozenset(agg.hosts)
        await self._refresh_host_aggregates(touched)

    async def delete_aggregate(self, aggregate: Aggregate) -> None:
        touched = set(self._agg_hosts.pop(aggregate.id, frozenset())) | set(aggregate.hosts)
        self._aggs.pop(aggregate.id, None)
        await self._refresh_host_aggregates(touched)

    async def update_instance_info(self, host_name: str, instance_uuids: Sequence[str]) -> None:
        """Known host: add the instances. Unknown host: a list of more than one is taken as
        the full list; otherwise the host's instances are re-read from its cell DB."""
        cell = self._cell_for_host(host_name)
        if cell is None:
            return
        known = host_name in cell.host_insts or host_name in cell.nodes_by_host
        cell.host_insts.setdefault(host_name, set())
        if not known and len(instance_uuids) <= 1:
            self._spawn(self._reload_host_instances(cell, host_name))
        touched = {host_name}
        for u in instance_uuids:
            before = cell.inst_host.get(u)
            if before is not None:
                touched.add(before)
            self._move_instance(cell, u, host_name)
        await self._reconcile_hosts(cell, touched, confirm=False)

    async def delete_instance_info(self, host_name: str, instance_uuid: str) -> None:
        cell = self._cell_for_host(host_name)
        if cell is None:
            return
        if host_name not in cell.host_insts and host_name not in cell.nodes_by_host:
            self._spawn(self._reload_host_instances(cell, host_name))
            return
        if cell.inst_host.get(instance_uuid) == host_name:
            self._move_instance(cell, instance_uuid, None)
        else:
            cell.host_insts.get(host_name, set()).discard(instance_uuid)
        # the instance is gone from the host: consumption we still assumed for it is too
        for hs in self.get_by_host_node(host_name):
            if instance_uuid in hs.assumed:
                await self.release(hs, instance_uuid)
        await self._reconcile_hosts(cell, {host_name}, confirm=False)

    async def sync_instance_info(self, host_name: str, instance_uuids: Sequence[str]) -> None:
        """A mismatch (or an unknown host) re-reads the host's instances from its cell DB in
        the background; the cast handler never waits on a database."""
        cell = self._cell_for_host(host_name)
        if cell is None:
            return
        ours = cell.host_insts.get(host_name)
        if ours is None and host_name in cell.nodes_by_host:
            ours = set()  # a host we load from the DB that has no instances
        if ours is None or ours != set(instance_uuids):
            if ours is not None:
                LOG.info(
                    "instance list of host %s differs from the compute's; re-reading it",
                    host_name,
                )
            self._spawn(self._reload_host_instances(cell, host_name))

    # ---- internals: background loops -------------------------------------------------------

    def _new_db(self, name: str, url: str) -> NovaDatabase:
        o = self._config.asyncsched
        return NovaDatabase(
            name,
            url,
            pool_size=o.db_pool_size,
            query_timeout=o.db_query_timeout,
            reconnect_max=o.db_reconnect_max,
            clock=self._clock,
        )

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any] | None:
        if self._closed:  # a cast after close(): nothing to do any more
            coro.close()
            return None
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            LOG.error("host-state background task failed", exc_info=task.exception())

    def _delay(self, db: NovaDatabase | None) -> float:
        o = self._config.asyncsched
        if db is not None and db.failures:
            base = db.retry_delay
        else:
            base = o.refresh_interval
        return base * (1.0 + o.refresh_jitter * self._rng.random())

    def _full_due(self, last_full: float | None) -> bool:
        return (
            last_full is None
            or self._clock() - last_full >= self._config.asyncsched.full_resync_interval
        )

    async def _api_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(self._delay(self._api))
            await self._guarded(self._api_pass(full=self._full_due(self._api_last_full)))

    async def _cell_loop(self, cell: _Cell) -> None:
        while not self._closed and self._cells.get(cell.uuid) is cell:
            await asyncio.sleep(self._delay(cell.db))
            recovering = cell.db.failures > 0 or not cell.loaded
            full = recovering or self._full_due(cell.last_full)
            await self._guarded(self._cell_pass(cell, full=full))

    async def _guarded(self, aw: Awaitable[None]) -> None:
        """A bug in one pass must not kill the loop: log it and go on."""
        try:
            await aw
        except asyncio.CancelledError:
            raise
        except Exception:
            LOG.exception("host-state refresh pass failed")

    def _start_cell_loop(self, cell: _Cell) -> None:
        if self._running and not self._closed and cell.task is None:
            cell.task = self._spawn(self._cell_loop(cell))

    # ---- internals: API database -------------------------------------------------------

    async def _api_pass(self, *, full: bool) -> None:
        api = self._api
        if api is None:
            return
        async with self._api_lock:
            try:
                fp_rows = await api.fetch(SQL_API_FINGERPRINT)
                fp = {k: str(v) for k, v in fp_rows[0].items()}
                old = {} if full else self._api_fp
                if fp.get("cells") != old.get("cells"):
                    cell_rows = await api.fetch(SQL_CELLS)
                    await self._apply_cells(cell_rows)
                if fp.get("hosts") != old.get("hosts"):
                    rows = await api.fetch(SQL_HOST_MAPPINGS)
                    self._host_cell = {r["host"]: r["uuid"] for r in rows}
                agg_keys = ("aggs", "agg_hosts", "agg_meta")
                if any(fp.get(k) != old.get(k) for k in agg_keys):
                    aggs = await api.fetch(SQL_AGGREGATES)
                    hosts = await api.fetch(SQL_AGGREGATE_HOSTS)
                    meta = await api.fetch(SQL_AGGREGATE_METADATA)
                    await self._apply_aggregates(aggs, hosts, meta)
            except DatabaseUnavailable as exc:
                api.mark_failed(exc)
                self.metrics["refresh_failures"] += 1
                return
            self._api_fp = fp
            self._api_loaded = True
            if full:
                self._api_last_full = self._clock()
            api.mark_ok()

    async def _apply_cells(self, rows: Sequence[Any]) -> None:
        wanted: dict[str, Any] = {}
        for r in rows:
            if r["uuid"] == CELL0_UUID or r["disabled"]:
                continue
            if not r["database_connection"]:
                LOG.warning(
                    "cell %s (%s) has no database_connection; ignored", r["name"], r["uuid"]
                )
                continue
            wanted[r["uuid"]] = r
        for uuid in list(self._cells):
            if uuid not in wanted:
                LOG.warning("cell %s left cell_mappings or was disabled; dropping its hosts", uuid)
                await self._drop_cell(self._cells[uuid])
        for uuid, r in wanted.items():
            mapping = CellMapping(uuid=uuid, name=r["name"], id=r["id"], disabled=False)
            cell = self._cells.get(uuid)
            if cell is not None and cell.db.url != r["database_connection"]:
                LOG.warning("cell %s database_connection changed; reloading it", uuid)
                await self._drop_cell(cell)
                cell = None
            if cell is None:
                try:
                    db = self._new_db(f"cell {r['name'] or uuid}", r["database_connection"])
                except ConfigError as exc:
                    LOG.error("cell %s: %s; ignored", uuid, exc)
                    continue
                cell = _Cell(mapping=mapping, db=db)
                self._cells[uuid] = cell
                if self._running:  # a new cell while running: load it now
                    self._start_cell_loop(cell)
                    self._spawn(self._guarded(self._cell_pass(cell, full=True)))
            else:
                cell.mapping = mapping

    async def _drop_cell(self, cell: _Cell) -> None:
        self._cells.pop(cell.uuid, None)
        if cell.task is not None:
            cell.task.cancel()
        for uuid in list(cell.table):
            self._remove_host(cell, uuid)
        self._spawn(cell.db.close())

    async def _apply_aggregates(
        self, aggs: Sequence[Any], hosts: Sequence[Any], meta: Sequence[Any]
    ) -> None:
        by_id_hosts: dict[int, list[str]] = {}
        for r in hosts:
            if r["host"]:
                by_id_hosts.setdefault(r["aggregate_id"], []).append(r["host"])
        by_id_meta: dict[int, dict[str, str]] = {}
        for r in meta:
            by_id_meta.setdefault(r["aggregate_id"], {})[r["key"]] = r["value"]
        new = {
            r["id"]: Aggregate(
                id=r["id"],
                uuid=r["uuid"] or "",
                name=r["name"] or "",
                hosts=tuple(by_id_hosts.get(r["id"], ())),
                metadata=by_id_meta.get(r["id"], {}),
            )
            for r in aggs
        }
        touched: set[str] = set()
        for agg_id in set(new) | set(self._aggs):
            a, b = self._aggs.get(agg_id), new.get(agg_id)
            if a != b:
                touched |= set(a.hosts if a else ()) | set(b.hosts if b else ())
        self._aggs = new
        self._agg_hosts = {i: frozenset(a.hosts) for i, a in new.items()}
        await self._refresh_host_aggregates(touched)

    async def _refresh_host_aggregates(self, hosts: Iterable[str]) -> None:
        by_host: dict[str, list[Aggregate]] = {}
        hosts = set(hosts)
        for agg_id in sorted(self._agg_hosts):
            for h in self._agg_hosts[agg_id] & hosts:
                by_host.setdefault(h, []).append(self._aggs[agg_id])
        for i, h in enumerate(hosts):
            aggs = tuple(by_host.get(h, ()))
            if aggs:
                self._host_aggs[h] = aggs
            else:
                self._host_aggs.pop(h, None)
            for hs in list(self._by_host.get(h, {}).values()):
                if hs.aggregates != aggs:
                    await self._locked(hs, _set_aggregates, aggs)
            if i % CHUNK == CHUNK - 1:
                await asyncio.sleep(0)

    # ---- internals: cell databases -----------------------------------------------------

    async def _cell_pass(self, cell: _Cell, *, full: bool) -> None:
        if self._cells.get(cell.uuid) is not cell:
            return
        async with cell.pass_lock:
            full = full or cell.watermark is None
            db = cell.db
            try:
                now_rows = await db.fetch(SQL_NOW)
                db_now: datetime = now_rows[0]["now"]
                if full:
                    services, nodes, insts = await asyncio.gather(
                        self._read_services(cell, SQL_SERVICES_ALL),
                        self._read_nodes(cell, SQL_NODES_ALL),
                        self._read_instances(cell, SQL_INSTANCES_ALL),
                    )
                else:
                    assert cell.watermark is not None
                    wm = cell.watermark - WATERMARK_OVERLAP
                    services, nodes, insts = await asyncio.gather(
                        self._read_services(cell, SQL_SERVICES_CHANGED, wm),
                        self._read_nodes(cell, SQL_NODES_CHANGED, wm),
                        self._read_instances(cell, SQL_INSTANCES_CHANGED, wm),
                    )
            except DatabaseUnavailable as exc:
                db.mark_failed(exc)
                self.metrics["refresh_failures"] += 1
                return
            # After the main reads, not beside them: a failing image-props query (e.g. no
            # such table) discards the pool and must not take the host data down with it.
            props: _PropsRead | None = None
            if self._image_props_on:
                since = None if cell.watermark is None else cell.watermark - WATERMARK_OVERLAP
                props = await self._read_image_props(
                    cell, insts, full=full or cell.image_props_full_needed, since=since
                )
            if self._cells.get(cell.uuid) is not cell:
                return  # dropped while we were reading
            if full:
                await self._apply_full(cell, services, nodes, insts, props)
                cell.last_full = self._clock()
                self.metrics["full_resyncs"] += 1
            else:
                await self._apply_changes(cell, services, nodes, insts, props)
            cell.watermark = db_now
            cell.loaded = True
            cell.last_refresh = self._clock()
            self.metrics["refresh_passes"] += 1
            db.mark_ok()

    # Readers turn rows into values page by page, reusing the objects already held for rows
    # that did not change: a full resync then leaves almost nothing new for the cyclic GC.

    async def _read_services(
        self, cell: _Cell, sql: str, *args: Any
    ) -> list[tuple[int, str, ServiceInfo | None]]:
        """(id, host, ServiceInfo or None when deleted), deleted rows first."""
        rows = await cell.db.fetch(sql, *args)
        out: list[tuple[int, str, ServiceInfo | None]] = []
        for i, r in enumerate(rows):
            host = r["host"]
            if not host:
                continue
            if r["deleted"]:
                out.append((r["id"], host, None))
                continue
            svc = service_info(r)
            cur = cell.services.get(host)
            out.append((r["id"], host, cur if cur == svc else svc))
            if i % (4 * CHUNK) == 4 * CHUNK - 1:
                await asyncio.sleep(0)
        out.sort(key=lambda t: t[2] is not None)
        return out

    async def _read_nodes(self, cell: _Cell, sql: str, *args: Any) -> _NodeRead:
        """Snapshots of the live rows (unchanged rows keep theirs: no JSON parsed) and the
        uuids of soft-deleted rows."""
        read = _NodeRead()
        last = -1
        parsed = 0
        while True:
            rows = await cell.db.fetch(sql, last, NODE_PAGE, *args)
            for r in rows:
                u = r["uuid"]
                if not u:
                    continue
                if r["deleted"]:
                    read.deleted.add(u)
                    continue
                read.live.add(u)
                try:
                    sig: int | None = hash(tuple(r))
                except TypeError:
                    sig = None
                prev = cell.snaps.get(u)
                if prev is not None and sig is not None and cell.sigs.get(u) == sig:
                    read.snaps[u] = prev
                    continue
                snap = node_snapshot(r, cell.uuid)
                if snap is not None:
                    read.snaps[u] = snap
                    if sig is not None:
                        read.sigs[u] = sig
                parsed += 1
                if parsed % CHUNK == 0:
                    await asyncio.sleep(0)  # parsing 10k JSON rows must not stall requests
            await asyncio.sleep(0)
            if len(rows) < NODE_PAGE:
                return read
            last = rows[-1]["id"]

    async def _read_instances(self, cell: _Cell, sql: str, *args: Any) -> dict[str, str | None]:
        """instance uuid -> host (None: deleted or no host)."""
        out: dict[str, str | None] = {}
        last = -1
        while True:
            rows = await cell.db.fetch(sql, last, INSTANCE_PAGE, *args)
            for r in rows:
                deleted = r.get("deleted", 0)
                out[r["uuid"]] = None if deleted else r["host"]
            await asyncio.sleep(0)
            if len(rows) < INSTANCE_PAGE:
                return out
            last = rows[-1]["id"]

    async def _read_image_props(
        self,
        cell: _Cell,
        insts: Mapping[str, str | None],
        *,
        full: bool,
        since: datetime | None,
    ) -> _PropsRead | None:
        """The image properties of every instance (full), or of the instances whose row or
        image metadata changed since ``since``; None when the read failed (logged, counted,
        and the next pass reads everything again)."""
        try:
            if full or since is None:
                raw: dict[str, str] = {}
                last = ""
                while True:
                    rows = await cell.db.fetch(SQL_SYSMETA_ALL, last, SYSMETA_PAGE)
                    for r in rows:
                        raw[r[0]] = r[1]
                    await asyncio.sleep(0)
                    if len(rows) < SYSMETA_PAGE:
                        break
                    last = rows[-1][0]
                uuids: set[str] | None = None
            else:
                uuids = {u for u, host in insts.items() if host is not None}
                rows = await cell.db.fetch(SQL_SYSMETA_CHANGED, since)
                uuids.update(r["instance_uuid"] for r in rows)
                raw = await self._fetch_image_rows(cell, uuids)
        except DatabaseUnavailable as exc:
            self.metrics["image_props_failures"] += 1
            cell.image_props_full_needed = True
            if cell.image_props_error is None:
                LOG.warning(
                    "cell %s: could not read the instances' image properties (kept as they"
                    " were; ImagePropertiesWeigher scores from them): %s",
                    cell.mapping.name or cell.uuid,
                    exc,
                )
            cell.image_props_error = str(exc)
            return None
        if cell.image_props_error is not None:
            LOG.warning("cell %s: instances' image properties readable again", cell.uuid)
            cell.image_props_error = None
        self.metrics["image_props_reads"] += 1
        return _PropsRead(
            props=await self._parse_image_rows(cell, raw, full=uuids is None), uuids=uuids
        )

    async def _fetch_image_rows(self, cell: _Cell, uuids: Iterable[str]) -> dict[str, str]:
        """Folded image_* system-metadata rows of these instances (batched ANY, indexed)."""
        raw: dict[str, str] = {}
        todo = sorted(uuids)
        for i in range(0, len(todo), SYSMETA_BATCH):
            rows = await cell.db.fetch(SQL_SYSMETA_OF, todo[i : i + SYSMETA_BATCH])
            raw.update((r[0], r[1]) for r in rows)
        return raw

    async def _parse_image_rows(
        self, cell: _Cell, raw: Mapping[str, str], *, full: bool
    ) -> dict[str, ImageProps]:
        """Rows -> shared parsed properties; instances without image properties are left
        out. A full read starts a fresh pool (reusing the old objects) so it never grows."""
        pool = _PropsPool() if full else cell.image_pool
        reuse = cell.image_pool if full else None
        out: dict[str, ImageProps] = {}
        for i, (uuid, kv) in enumerate(raw.items()):
            props = pool.parse(kv, reuse)
            if props:
                out[uuid] = props
            if i % (16 * CHUNK) == 16 * CHUNK - 1:
                await asyncio.sleep(0)
        if full:
            cell.image_pool = pool
        return out

    def _apply_image_props(self, cell: _Cell, read: _PropsRead | None) -> set[str]:
        """Take a props read (after the pass's instance moves); returns the hosts whose
        instances' image properties changed."""
        if read is None or not self._image_props_on:
            return set()
        changed: set[str] = set()
        old = cell.image_props
        if read.uuids is None:
            new = {u: p for u, p in read.props.items() if u in cell.inst_host}
            if not cell.image_props_loaded:  # first load: every host gets its view
                changed.update(cell.nodes_by_host)
            for u in old.keys() | new.keys():
                if old.get(u) is not new.get(u):
                    host = cell.inst_host.get(u)
                    if host is not None:
                        changed.add(host)
            cell.image_props = new
            cell.image_props_loaded = True
            cell.image_props_full_needed = False
        else:
            for u in read.uuids:
                p = read.props.get(u) if u in cell.inst_host else None
                if old.get(u) is not p:
                    if p is None:
                        old.pop(u, None)
                    else:
                        old[u] = p
                    host = cell.inst_host.get(u)
                    if host is not None:
                        changed.add(host)
        return changed

    async def _apply_full(
        self,
        cell: _Cell,
        services: list[tuple[int, str, ServiceInfo | None]],
        nodes: _NodeRead,
        insts: dict[str, str | None],
        props: _PropsRead | None = None,
    ) -> None:
        new_services = {host: svc for _, host, svc in services if svc is not None}
        snaps = nodes.snaps
        # keep the last values of a live node whose usage is "not updated yet"
        for u in nodes.live - set(snaps):
            old = cell.snaps.get(u)
            if old is not None:
                snaps[u] = old
        dirty = (set(cell.snaps) | set(cell.table)) ^ set(snaps)
        moved_hosts: set[str] = set()
        for u in set(cell.inst_host) - set(insts):
            moved_hosts.add(cell.inst_host[u])
            self._move_instance(cell, u, None)
        for i, (u, host) in enumerate(insts.items()):
            before = cell.inst_host.get(u)
            if before != host:
                moved_hosts.update(h for h in (before, host) if h)
                self._move_instance(cell, u, host)
            if i % (16 * CHUNK) == 16 * CHUNK - 1:
                await asyncio.sleep(0)
        for h in [h for h, s in cell.host_insts.items() if not s]:
            del cell.host_insts[h]
        moved_hosts |= self._apply_image_props(cell, props)
        for u, snap in snaps.items():
            hs = cell.table.get(u)
            if (
                hs is None
                or hs.assumed
                or cell.snaps.get(u) is not snap
                or new_services.get(snap.host) is not hs.service
                or snap.host in moved_hosts
            ):
                dirty.add(u)
        cell.services = new_services
        cell.snaps = snaps
        cell.sigs = {u: sig for u, sig in cell.sigs.items() if u in snaps}
        cell.sigs.update(nodes.sigs)
        cell.nodes_by_host = {}
        for snap in snaps.values():
            cell.nodes_by_host.setdefault(snap.host, set()).add(snap.uuid)
        await self._reconcile_nodes(cell, dirty)

    async def _apply_changes(
        self,
        cell: _Cell,
        services: list[tuple[int, str, ServiceInfo | None]],
        nodes: _NodeRead,
        insts: dict[str, str | None],
        props: _PropsRead | None = None,
    ) -> None:
        dirty_hosts: set[str] = set()
        dirty_nodes: set[str] = set()
        heartbeats: set[str] = set()  # hosts whose only news is their service row
        for svc_id, host, svc in services:  # deleted rows first: a re-created host ends live
            cur = cell.services.get(host)
            if svc is None:
                if cur is not None and cur.id == svc_id:
                    del cell.services[host]
                    dirty_hosts.add(host)
            elif svc is not cur:
                cell.services[host] = svc
                (heartbeats if cur is not None else dirty_hosts).add(host)
        for u in nodes.deleted - nodes.live:
            if u in cell.snaps:
                self._forget_snap(cell, u)
                dirty_nodes.add(u)
        for u, snap in nodes.snaps.items():
            old = cell.snaps.get(u)
            if old is not snap:
                if old is not None and old.host != snap.host:
                    self._forget_snap(cell, u)
                cell.snaps[u] = snap
                cell.nodes_by_host.setdefault(snap.host, set()).add(u)
                dirty_nodes.add(u)
        cell.sigs.update(nodes.sigs)
        for u, ihost in insts.items():
            before = cell.inst_host.get(u)
            if before != ihost:
                self._move_instance(cell, u, ihost)
                dirty_hosts.update(h for h in (before, ihost) if h)
        dirty_hosts |= self._apply_image_props(cell, props)
        for h in dirty_hosts:
            dirty_nodes |= cell.nodes_by_host.get(h, set())
        # pending assumptions are checked every pass (confirmation / TTL)
        dirty_nodes |= {u for u, hs in cell.table.items() if hs.assumed}
        await self._reconcile_nodes(cell, dirty_nodes)
        for i, h in enumerate(heartbeats - dirty_hosts):
            svc = cell.services.get(h)
            for u in cell.nodes_by_host.get(h, ()):
                hs = cell.table.get(u)
                if hs is not None and u not in dirty_nodes:
                    await self._locked(hs, _set_service, svc)
            if i % CHUNK == CHUNK - 1:
                await asyncio.sleep(0)

    def _forget_snap(self, cell: _Cell, node_uuid: str) -> None:
        snap = cell.snaps.pop(node_uuid, None)
        cell.sigs.pop(node_uuid, None)
        if snap is not None:
            nodes = cell.nodes_by_host.get(snap.host)
            if nodes is not None:
                nodes.discard(node_uuid)
                if not nodes:
                    del cell.nodes_by_host[snap.host]

    def _move_instance(self, cell: _Cell, inst_uuid: str, host: str | None) -> None:
        before = cell.inst_host.pop(inst_uuid, None)
        if before is not None:
            s = cell.host_insts.get(before)
            if s is not None:
                s.discard(inst_uuid)
        if host is not None:
            cell.inst_host[inst_uuid] = host
            cell.host_insts.setdefault(host, set()).add(inst_uuid)
        else:  # gone (or hostless): a later appearance re-reads its image properties
            cell.image_props.pop(inst_uuid, None)

    def _cell_for_host(self, host: str) -> _Cell | None:
        uuid = self.cell_of_host(host)
        if uuid is None:
            LOG.debug("instance info for host %s, which is in no known cell; ignored", host)
            return None
        return self._cells.get(uuid)

    async def _reload_host_instances(self, cell: _Cell, host: str) -> None:
        """Re-read one host's instance uuids from its cell (nova's _recreate_instance_info)."""
        try:
            rows = await cell.db.fetch(SQL_INSTANCES_OF_HOST, host)
        except DatabaseUnavailable as exc:
            LOG.warning("could not re-read the instances of host %s: %s", host, exc)
            return
        if self._cells.get(cell.uuid) is not cell:
            return
        fresh = {r["uuid"] for r in rows}
        images: dict[str, ImageProps] = {}
        missing = [u for u in fresh if u not in cell.image_props]
        if self._image_props_on and missing:
            # instances whose rows may be older than any watermark: read them now
            try:
                raw = await self._fetch_image_rows(cell, missing)
            except DatabaseUnavailable as exc:
                self.metrics["image_props_failures"] += 1
                LOG.warning("could not read image properties of host %s: %s", host, exc)
            else:
                images = await self._parse_image_rows(cell, raw, full=False)
            if self._cells.get(cell.uuid) is not cell:
                return
        for u in list(cell.host_insts.get(host, set())):
            if u not in fresh:
                self._move_instance(cell, u, None)
        touched = {host}
        for u in fresh:
            before = cell.inst_host.get(u)
            if before is not None:
                touched.add(before)
            self._move_instance(cell, u, host)
        if self._image_props_on:
            cell.image_props.update(images)
        await self._reconcile_hosts(cell, touched, confirm=False)

    async def _reconcile_hosts(
        self, cell: _Cell, hosts: Iterable[str], *, confirm: bool = True
    ) -> None:
        nodes: set[str] = set()
        for h in hosts:
            nodes |= cell.nodes_by_host.get(h, set())
        await self._reconcile_nodes(cell, nodes, confirm=confirm)

    async def _reconcile_nodes(
        self, cell: _Cell, uuids: Iterable[str], *, confirm: bool = True
    ) -> None:
        """Make the visible table match the cell's snapshots + services for these nodes.

        ``confirm``: this follows a read of compute_nodes, so an assumed instance that is now
        listed on its host is counted in the node's row and the assumption can go. Casts
        pass False: a compute's instance list can arrive before we re-read its usage."""
        for i, uuid in enumerate(uuids):
            snap = cell.snaps.get(uuid)
            service = cell.services.get(snap.host) if snap is not None else None
            hs = cell.table.get(uuid)
            if snap is None or service is None:
                if snap is not None and snap.uuid not in cell.warned_no_service:
                    cell.warned_no_service.add(snap.uuid)
                    LOG.warning(
                        "no nova-compute service for compute node %s (host %s); skipped",
                        snap.nodename,
                        snap.host,
                    )
                if hs is not None:
                    self._remove_host(cell, uuid)
                continue
            cell.warned_no_service.discard(uuid)
            if hs is not None and (hs.host, hs.nodename) != (snap.host, snap.nodename):
                self._remove_host(cell, uuid)
                hs = None
            if hs is None:
                other = self._by_uuid.get(uuid)
                if other is not None and other.cell_uuid != cell.uuid:
                    LOG.warning("compute node %s appears in two cells; using %s", uuid, cell.uuid)
                    ocell = self._cells.get(other.cell_uuid)
                    if ocell is not None:
                        self._remove_host(ocell, uuid)
                hs = HostState(
                    uuid=uuid, host=snap.host, nodename=snap.nodename, cell_uuid=cell.uuid
                )
                cell.table[uuid] = hs
                self._by_uuid[uuid] = hs
                self._by_host.setdefault(hs.host, {})[hs.nodename] = hs
            await self._locked(hs, self._rebase_with, cell, snap, service, True, confirm)
            if i % CHUNK == CHUNK - 1:
                await asyncio.sleep(0)

    def _remove_host(self, cell: _Cell, uuid: str) -> None:
        hs = cell.table.pop(uuid, None)
        if hs is None:
            return
        if self._by_uuid.get(uuid) is hs:
            del self._by_uuid[uuid]
        nodes = self._by_host.get(hs.host)
        if nodes is not None and nodes.get(hs.nodename) is hs:
            del nodes[hs.nodename]
            if not nodes:
                del self._by_host[hs.host]
        hs.touch()

    async def _locked(self, hs: HostState, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(hs, *args)`` under ``hs.lock``; no await at all when it is free."""
        if hs.lock.locked():
            async with hs.lock:
                fn(hs, *args)
        else:
            fn(hs, *args)

    def _rebase_host(self, hs: HostState) -> bool:
        """Recompute a host from its snapshot and pending assumptions (caller holds lock).
        False when the host has no snapshot (it left the table)."""
        cell = self._cells.get(hs.cell_uuid)
        snap = cell.snaps.get(hs.uuid) if cell is not None else None
        if cell is None or snap is None:
            return False
        self._rebase_with(
            hs, cell, snap, cell.services.get(hs.host, hs.service), touch=False, confirm=False
        )
        return True

    def _rebase_with(
        self,
        hs: HostState,
        cell: _Cell,
        snap: NodeSnapshot,
        service: ServiceInfo | None,
        touch: bool = True,
        confirm: bool = True,
    ) -> None:
        """DB snapshot + pending assumptions -> host fields (caller holds ``hs.lock``)."""
        base_insts = cell.host_insts.get(snap.host, set())
        now = self._clock()
        ttl = self._config.asyncsched.assumed_ttl
        for a in list(hs.assumed.values()):
            if confirm and a.instance_uuid in base_insts:
                del hs.assumed[a.instance_uuid]
                self.metrics["assumptions_confirmed"] += 1
            elif now - a.created > ttl:
                del hs.assumed[a.instance_uuid]
                self.metrics["assumptions_expired"] += 1
                LOG.info(
                    "assumed consumption of instance %s on %s expired after %.0fs unreported",
                    a.instance_uuid,
                    hs.nodename,
                    ttl,
                )
        cpu, ram, disk = resolve_ratios(snap, self._config.default)
        hs.compute_node_id = snap.compute_node_id
        hs.total_usable_ram_mb = snap.total_usable_ram_mb
        hs.free_ram_mb = snap.free_ram_mb
        hs.total_usable_disk_gb = snap.total_usable_disk_gb
        hs.disk_mb_used = snap.disk_mb_used
        hs.free_disk_mb = snap.free_disk_mb
        hs.vcpus_total = snap.vcpus_total
        hs.vcpus_used = snap.vcpus_used
        hs.cpu_allocation_ratio = cpu
        hs.ram_allocation_ratio = ram
        hs.disk_allocation_ratio = disk
        hs.num_instances = snap.num_instances
        hs.num_io_ops = snap.num_io_ops
        hs.failed_builds = snap.failed_builds
        hs.stats = snap.stats
        hs.host_ip = snap.host_ip
        hs.hypervisor_type = snap.hypervisor_type
        hs.hypervisor_version = snap.hypervisor_version
        hs.hypervisor_hostname = snap.nodename
        hs.cpu_info = snap.cpu_info
        hs.supported_instances = snap.supported_instances
        hs.metrics = snap.metrics
        hs.aggregates = self._host_aggs.get(snap.host, ())
        hs.service = service
        hs.instances = set(base_insts)
        if hs.assumed:
            for a in sorted(hs.assumed.values(), key=lambda a: a.created):
                _apply_assumption(hs, a)
                hs.instances.add(a.instance_uuid)
            self._rebuild_numa_pci(hs, snap.numa_topology, snap.pci_pools)
        else:
            hs.numa_topology = snap.numa_topology
            hs.pci_pools = snap.pci_pools
            hs.updated = snap.updated
        if self._image_props_on:
            known = cell.image_props
            images = {u: p for u in hs.instances if (p := known.get(u)) is not None}
            hs.extra[IMAGE_PROPS_KEY] = images
            hs.extra[IMAGE_PROP_COUNTS_KEY] = image_prop_counts(images, images)
        elif IMAGE_PROPS_KEY in hs.extra or IMAGE_PROP_COUNTS_KEY in hs.extra:
            hs.extra.pop(IMAGE_PROPS_KEY, None)
            hs.extra.pop(IMAGE_PROP_COUNTS_KEY, None)
        if touch:
            hs.touch()

    async def _reapply_all(self) -> None:
        for cell in list(self._cells.values()):
            await self._reconcile_nodes(cell, list(cell.table), confirm=False)


def _apply_assumption(hs: HostState, a: Assumption) -> None:
    """nova's consume_from_request arithmetic for one instance (scalars; NUMA/PCI are
    rebuilt by ``_rebuild_numa_pci``)."""
    hs.free_ram_mb -= a.memory_mb
    hs.free_disk_mb -= a.disk_mb
    hs.vcpus_used += a.vcpus
    hs.num_instances += 1
    hs.num_io_ops += 1


def _apply_legacy(hs: HostState, a: Assumption) -> None:
    """A legacy assumption's host values after its consume."""
    if a.numa_topology is not None:
        hs.numa_topology = a.numa_topology
    if a.pci_pools is not None:
        hs.pci_pools = a.pci_pools


def _unapply_assumption(hs: HostState, a: Assumption) -> None:
    """Inverse arithmetic, for a host that has no DB snapshot to rebase on."""
    hs.free_ram_mb += a.memory_mb
    hs.free_disk_mb += a.disk_mb
    hs.vcpus_used -= a.vcpus
    hs.num_instances -= 1
    hs.num_io_ops -= 1


def _set_service(hs: HostState, service: ServiceInfo | None) -> None:
    hs.service = service
    hs.touch()


def _set_aggregates(hs: HostState, aggs: tuple[Aggregate, ...]) -> None:
    hs.aggregates = aggs
    hs.touch()
