"""The visible host table: every cell's hosts by node uuid and by (host, node).

Why apart from the cache: the table is what requests read; ``reconcile`` is the one place a
host enters, is rebuilt, or leaves it, from its cell's index (a node without a nova-compute
service row is not visible; a node in two cells is kept in the newest).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asyncsched.objects.models import CellMapping
from asyncsched.state.db import NovaDatabase
from asyncsched.state.host_state import HostState, ServiceInfo
from asyncsched.state.images import CellImages
from asyncsched.state.index import CellIndex
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
    warned_no_service: set[str] = field(default_factory=set)
    pass_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: asyncio.Task[None] | None = None

    @property
    def uuid(self) -> str:
        return self.mapping.uuid

    def health(self, now: float, image_props_wanted: bool) -> dict[str, Any]:
        h = db_health(self.db, self.loaded, now)
        h.update(
            name=self.mapping.name,
            hosts=len(self.table),
            last_full_age=None if self.last_full is None else round(now - self.last_full, 3),
            image_props={
                "wanted": image_props_wanted,
                "loaded": self.index.image_props_loaded,
                "instances": len(self.index.image_props),
                "images": len(self.images.pool.by_value),
                "last_error": self.images.error,
            },
        )
        return h


def db_health(db: NovaDatabase | None, loaded: bool, now: float) -> dict[str, Any]:
    """Staleness, age and retry state of one database for ``health()``."""
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


# Rebuild one host from its cell's snapshot and service (caller holds ``hs.lock``).
Rebase = Callable[[HostState, "Cell", NodeSnapshot, ServiceInfo], None]


@dataclass(eq=False)
class HostTable:
    """The cells and their visible hosts; reads are O(1) per host."""

    cells: dict[str, Cell] = field(default_factory=dict)
    by_uuid: dict[str, HostState] = field(default_factory=dict)
    by_host: dict[str, dict[str, HostState]] = field(default_factory=dict)

    async def reconcile(self, cell: Cell, uuids: Iterable[str], rebase: Rebase) -> None:
        """Make the visible table match the cell's snapshots + services for these nodes;
        each host that stays is rebuilt by ``rebase`` under its lock."""
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
                    uuid=uuid, host=snap.host, nodename=snap.nodename, cell_uuid=cell.uuid
                )
                cell.table[uuid] = hs
                self.by_uuid[uuid] = hs
                self.by_host.setdefault(hs.host, {})[hs.nodename] = hs
            await locked(hs, rebase, cell, snap, service)
            if i % CHUNK == CHUNK - 1:
                await asyncio.sleep(0)

    def remove(self, cell: Cell, uuid: str) -> None:
        hs = cell.table.pop(uuid, None)
        if hs is None:
            return
        if self.by_uuid.get(uuid) is hs:
            del self.by_uuid[uuid]
        nodes = self.by_host.get(hs.host)
        if nodes is not None and nodes.get(hs.nodename) is hs:
            del nodes[hs.nodename]
            if not nodes:
                del self.by_host[hs.host]
        hs.touch()


async def locked(hs: HostState, fn: Callable[..., None], *args: Any) -> None:
    """Run ``fn(hs, *args)`` under ``hs.lock``; no await at all when it is free."""
    if hs.lock.locked():
        async with hs.lock:
            fn(hs, *args)
    else:
        fn(hs, *args)
