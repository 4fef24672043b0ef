"""The visible host table: every cell's hosts by node uuid and by (host, node).

Why apart from the cache: the table is what requests read; ``reconcile`` is the one place a
host enters, is rebuilt, or leaves it, from its cell's index (a node without a nova-compute
service row is not visible; a node in two cells is kept in the newest).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from asyncsched.common.clock import utcnow
from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, CellMapping
from asyncsched.state import assumptions
from asyncsched.state.api import AggregateIndex
from asyncsched.state.beats import keep_seconds, swap_beat
from asyncsched.state.db import NovaDatabase
from asyncsched.state.fresh import FreshState
from asyncsched.state.health import CellHealth, DatabaseHealth, ImagePropsHealth
from asyncsched.state.host_state import ChangeLog, HostState, ServiceInfo
from asyncsched.state.images import CellImages, ImageProps, PropsRead
from asyncsched.state.index import CellIndex, diff_changes, diff_full
from asyncsched.state.readers import CellRead
from asyncsched.state.rows import NodeSnapshot
from asyncsched.state.sql import CHUNK

LOG = logging.getLogger(__name__)


@dataclass(eq=False)
class Cell:
    """Everything the cache knows about one cell; mutated only by the cache."""

    mapping: CellMapping
    db: NovaDatabase
    index: CellIndex = field(default_factory=CellIndex)
    images: CellImages = field(default_factory=CellImages)
    table: dict[str, HostState] = field(default_factory=dict)  # visible hosts of this cell
    watermark: datetime | None = None  # naive UTC, DB clock
    loaded: bool = False
    last_full: float | None = None
    last_refresh: float | None = None
    sweep_mark: datetime | None = None  # DB instant of the last read of every beat
    swept_at: float | None = None  # clock() of that read (sweep or full pass)
    warned_no_service: set[str] = field(default_factory=set)
    pass_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: asyncio.Task[None] | None = None
    fresh: FreshState = field(default_factory=FreshState)  # the per-request services reads

    @property
    def uuid(self) -> str:
        return self.mapping.uuid

    def health(self, now: float, image_props_wanted: bool) -> CellHealth:
        db = db_health(self.db, self.loaded, now)
        return CellHealth(
            **{f.name: getattr(db, f.name) for f in fields(DatabaseHealth)},
            name=self.mapping.name,
            hosts=len(self.table),
            last_full_age=None if self.last_full is None else round(now - self.last_full, 3),
            image_props=ImagePropsHealth(
                wanted=image_props_wanted,
                loaded=self.index.image_props_loaded,
                instances=len(self.index.image_props),
                images=len(self.images.pool.by_value),
                last_error=self.images.error,
            ),
            services_fresh=self.fresh.health(now),
        )


def db_health(db: NovaDatabase | None, loaded: bool, now: float) -> DatabaseHealth:
    """Staleness, age and retry state of one database for ``health()``."""
    if db is None:
        return DatabaseHealth(
            stale=True,
            age=None,
            loaded=False,
            consecutive_failures=0,
            read_failures=0,
            down_for=None,
            retry_in=None,
            last_error=None,
            address=None,
        )
    return DatabaseHealth(
        stale=db.failures > 0 or not loaded,
        age=None if db.last_ok is None else round(now - db.last_ok, 3),
        loaded=loaded,
        consecutive_failures=db.failures,
        read_failures=db.read_failures,
        down_for=None if db.failed_since is None else round(now - db.failed_since, 3),
        retry_in=round(db.retry_delay, 3),
        last_error=db.last_error,
        address=db.address,
    )


@dataclass(eq=False)
class Live:
    """What rebuilding a host reads besides its cell. One object shared with the cache,
    which swaps ``config`` and ``image_props_on`` on reconfigure."""

    config: Config
    clock: Callable[[], float]
    metrics: dict[str, int]
    image_props_on: bool
    aggs: AggregateIndex = field(default_factory=AggregateIndex)


@dataclass(eq=False)
class HostTable:
    """The cells and their visible hosts; reads are O(1) per host."""

    live: Live
    cells: dict[str, Cell] = field(default_factory=dict)
    by_uuid: dict[str, HostState] = field(default_factory=dict)
    by_host: dict[str, dict[str, HostState]] = field(default_factory=dict)
    epoch: int = 0  # moves whenever by_uuid gains or loses a host
    changes: ChangeLog = field(default_factory=ChangeLog)  # every host's touches, in order

    async def apply_read(
        self, cell: Cell, read: CellRead, props: PropsRead | None, *, full: bool
    ) -> None:
        """Diff one pass's read into the cell's index and rebuild the dirty hosts; a
        heartbeat only swaps the host's service."""
        index = cell.index
        if full:
            beats: dict[str, str] = {}
            dirty = diff_full(
                index, cell.table, read.services, read.nodes, read.insts, props, beats
            )
            await self.reconcile(cell, dirty)
            await self.swap_services(cell, beats)
            return
        changes = diff_changes(index, cell.table, read.services, read.nodes, read.insts, props)
        await self.reconcile(cell, changes.dirty)
        await self.swap_services(cell, changes.heartbeats)

    async def swap_services(self, cell: Cell, nodes: Mapping[str, str]) -> None:
        """Give these nodes (uuid -> host) their host's service as the index has it now;
        nothing else of the host changes. A heartbeat is no touch (``state/beats.py``)."""
        services = cell.index.services
        config = self.live.config
        d = config.default
        keep = keep_seconds(
            float(d.service_down_time), float(d.report_interval), config.asyncsched.refresh_interval
        )
        now, report = utcnow(), float(d.report_interval)
        table = cell.table
        for i, (u, h) in enumerate(nodes.items()):
            hs = table.get(u)
            if hs is not None:
                if hs.lock.locked():
                    await locked(hs, _swap_service, services.get(h), now, keep, report)
                else:  # ``locked`` inline: no coroutine a host (1,000 a second a cell)
                    _swap_service(hs, services.get(h), now, keep, report)
            if i % CHUNK == CHUNK - 1:
                await asyncio.sleep(0)

    async def reload_host(
        self, cell: Cell, host: str, fresh: set[str], images: dict[str, ImageProps]
    ) -> None:
        """``host`` has exactly the instances ``fresh`` (re-read from its cell)."""
        index = cell.index
        for u in list(index.host_insts.get(host, set())):
            if u not in fresh:
                index.move_instance(u, None)
        touched = index.move_to_host(host, fresh)
        if self.live.image_props_on:
            index.image_props.update(images)
        await self.reconcile(cell, index.nodes_of(touched), confirm=False)

    async def set_aggregates(self, hosts: Iterable[str]) -> None:
        """Give these hosts their aggregates as ``live.aggs`` now has them."""
        for i, (h, aggs) in enumerate(self.live.aggs.recompute(hosts).items()):
            for hs in list(self.by_host.get(h, {}).values()):
                if hs.aggregates != aggs:
                    await locked(hs, _set_aggregates, aggs)
            if i % CHUNK == CHUNK - 1:
                await asyncio.sleep(0)

    async def reapply_all(self) -> None:
        for cell in list(self.cells.values()):
            await self.reconcile(cell, list(cell.table), confirm=False)

    async def reconcile(self, cell: Cell, uuids: Iterable[str], *, confirm: bool = True) -> None:
        """Make the visible table match the cell's snapshots + services for these nodes.

        ``confirm``: this follows a read of compute_nodes, so an assumed instance that is now
        listed on its host is counted in the node's row and the assumption can go. Casts
        pass False: a compute's instance list can arrive before we re-read its usage."""
        for i, uuid in enumerate(uuids):
            snap = cell.index.snaps.get(uuid)
            service = cell.index.services.get(snap.host) if snap is not None else None
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
                    self.remove(cell, uuid)
                continue
            cell.warned_no_service.discard(uuid)
            if hs is not None and (hs.host, hs.nodename) != (snap.host, snap.nodename):
                self.remove(cell, uuid)
                hs = None
            if hs is None:
                other = self.by_uuid.get(uuid)
                if other is not None and other.cell_uuid != cell.uuid:
                    LOG.warning("compute node %s appears in two cells; using %s", uuid, cell.uuid)
                    ocell = self.cells.get(other.cell_uuid)
                    if ocell is not None:
                        self.remove(ocell, uuid)
                hs = HostState(
                    uuid=uuid,
                    host=snap.host,
                    nodename=snap.nodename,
                    cell_uuid=cell.uuid,
                    changes=self.changes,
                )
                cell.table[uuid] = hs
                self.by_uuid[uuid] = hs
                self.epoch += 1
                self.by_host.setdefault(hs.host, {})[hs.nodename] = hs
            await locked(hs, self._rebase, cell, snap, service, True, confirm)
            if i % CHUNK == CHUNK - 1:
                await asyncio.sleep(0)

    def remove(self, cell: Cell, uuid: str) -> None:
        hs = cell.table.pop(uuid, None)
        if hs is None:
            return
        if self.by_uuid.get(uuid) is hs:
            del self.by_uuid[uuid]
            self.epoch += 1
        nodes = self.by_host.get(hs.host)
        if nodes is not None and nodes.get(hs.nodename) is hs:
            del nodes[hs.nodename]
            if not nodes:
                del self.by_host[hs.host]
        hs.touch()

    def rebase_host(self, hs: HostState) -> bool:
        """Recompute a host from its snapshot and pending assumptions (caller holds lock).
        False when the host has no snapshot (it left the table)."""
        cell = self.cells.get(hs.cell_uuid)
        snap = cell.index.snaps.get(hs.uuid) if cell is not None else None
        if cell is None or snap is None:
            return False
        service = cell.index.services.get(hs.host, hs.service)
        self._rebase(hs, cell, snap, service, False, False)
        return True

    def _rebase(
        self,
        hs: HostState,
        cell: Cell,
        snap: NodeSnapshot,
        service: ServiceInfo | None,
        touch: bool,
        confirm: bool,
    ) -> None:
        live = self.live
        assumptions.rebase(
            hs,
            snap,
            service,
            base_insts=cell.index.host_insts.get(snap.host, set()),
            aggregates=live.aggs.host_aggs.get(snap.host, ()),
            image_props=cell.index.image_props if live.image_props_on else None,
            config=live.config,
            now=live.clock(),
            metrics=live.metrics,
            touch=touch,
            confirm=confirm,
            sibling_pending=[u for sib in self.siblings(hs) for u in sib.assumed],
        )

    def siblings(self, hs: HostState) -> list[HostState]:
        """The other nodes of ``hs``'s compute service (ironic style: one service, many
        nodes). nova's HostManager gives all nodes of a host one shared instances dict, so an
        instance on one node counts on each of them (server-group filters and weighers)."""
        nodes = self.by_host.get(hs.host)
        if not nodes or len(nodes) == 1:
            return []
        return [n for n in nodes.values() if n is not hs]

    def share_instance(self, hs: HostState, instance_uuid: str) -> None:
        """An instance just placed on ``hs`` is on every node of its service, as in nova."""
        for sib in self.siblings(hs):
            if instance_uuid not in sib.instances:
                sib.instances.add(instance_uuid)
                sib.touch()

    def unshare_instances(self, hs: HostState, instance_uuids: Collection[str]) -> None:
        """Released instances leave the other nodes of ``hs``'s service too, unless the
        database lists them on that service or another node still assumes them."""
        cell = self.cells.get(hs.cell_uuid)
        listed = cell.index.host_insts.get(hs.host, set()) if cell is not None else set()
        for sib in self.siblings(hs):
            gone = {u for u in instance_uuids if u not in listed and u not in sib.assumed}
            if gone & sib.instances:
                sib.instances -= gone
                sib.touch()


async def locked(hs: HostState, fn: Callable[..., None], *args: Any) -> None:
    """Run ``fn(hs, *args)`` under ``hs.lock``; no await at all when it is free."""
    if hs.lock.locked():
        async with hs.lock:
            fn(hs, *args)
    else:
        fn(hs, *args)


def _swap_service(
    hs: HostState, service: ServiceInfo | None, now: datetime, keep: float, report: float
) -> None:
    if service is not None and swap_beat(hs, service, now, keep, report):
        return
    hs.service = service
    hs.touch()


def _set_aggregates(hs: HostState, aggs: tuple[Aggregate, ...]) -> None:
    hs.aggregates = aggs
    hs.touch()
