"""HostState: what the scheduler knows about one compute node, kept live in memory.

One object per compute node lives in the host-state cache for the life of the process. The
background refresh rewrites its fields from the database; consumption by requests changes
them under ``lock`` (an ``asyncio.Lock`` per host). ``generation`` increases on every change so
derived per-request views (e.g. columnar arrays in the scheduler) can tell when to rebuild.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asyncsched.objects.host_resources import HostNUMATopology, PciDevicePool
from asyncsched.objects.models import Aggregate
from asyncsched.resources.numa.placed import PlacedNumaPci

__all__ = ["Assumption", "ChangeLog", "HostState", "PlacedNumaPci", "ServiceInfo"]

#: touches a ChangeLog keeps before it starts over (its readers then compare every host once)
CHANGELOG_LIMIT = 100_000


class ChangeLog:
    """The hosts of one table in the order they were touched.

    A reader that keeps a derived view of every host (the scheduler's columns) asks what was
    touched since its last mark and rebuilds those, instead of comparing all 10,000 hosts'
    generations on every request. When the log starts over, ``since`` says so (None) and the
    reader compares every host once.
    """

    __slots__ = ("_epoch", "_items", "_limit")

    def __init__(self, limit: int = CHANGELOG_LIMIT) -> None:
        self._items: list[HostState] = []
        self._epoch = 0
        self._limit = limit

    def add(self, host: HostState) -> None:
        if len(self._items) >= self._limit:
            self._items.clear()
            self._epoch += 1
        self._items.append(host)

    def mark(self) -> tuple[int, int]:
        """A position to ask ``since`` about later."""
        return (self._epoch, len(self._items))

    def since(self, mark: tuple[int, int]) -> list[HostState] | None:
        """Hosts touched after ``mark`` (repeats possible), or None if the log started over."""
        epoch, position = mark
        return self._items[position:] if epoch == self._epoch else None


@dataclass(frozen=True, slots=True)
class ServiceInfo:
    """The ``services`` row of the host's nova-compute."""

    id: int
    host: str
    binary: str = "nova-compute"
    disabled: bool = False
    disabled_reason: str | None = None
    forced_down: bool = False
    last_seen_up: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    version: int = 0
    uuid: str | None = None

    @property
    def heartbeat(self) -> datetime | None:
        """The service's last sign of life (nova: ``last_seen_up or created_at``)."""
        return self.last_seen_up or self.created_at


@dataclass(frozen=True, slots=True)
class Assumption:
    """Consumption accepted by Placement but not yet visible in the compute node's row."""

    instance_uuid: str
    memory_mb: int
    disk_mb: int
    vcpus: int
    created: float  # loop.time()
    placed: PlacedNumaPci | None = None  # NUMA/PCI usage, re-applied on every rebuild
    conflict: str | None = None  # why (part of) ``placed`` does not fit the host values now


@dataclass(slots=True, eq=False)
class HostState:
    """Mutable, long-lived; mutate only under ``lock`` (refresh and consume)."""

    uuid: str  # compute node uuid == Placement root provider uuid
    host: str  # service host
    nodename: str  # hypervisor_hostname
    cell_uuid: str
    compute_node_id: int = 0
    total_usable_ram_mb: int = 0
    free_ram_mb: int = 0
    total_usable_disk_gb: int = 0
    disk_mb_used: int = 0
    free_disk_mb: int = 0
    vcpus_total: int = 0
    vcpus_used: int = 0
    cpu_allocation_ratio: float = 4.0
    ram_allocation_ratio: float = 1.0
    disk_allocation_ratio: float = 1.0
    num_instances: int = 0
    num_io_ops: int = 0
    failed_builds: int = 0
    stats: dict[str, str] = field(default_factory=dict)
    host_ip: str | None = None
    hypervisor_type: str | None = None
    hypervisor_version: int | None = None
    hypervisor_hostname: str | None = None
    cpu_info: str | None = None  # JSON string, as nova keeps it
    supported_instances: tuple[tuple[str, str, str], ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)
    numa_topology: HostNUMATopology | None = None
    pci_pools: tuple[PciDevicePool, ...] = ()
    aggregates: tuple[Aggregate, ...] = ()
    instances: set[str] = field(default_factory=set)
    service: ServiceInfo | None = None
    updated: datetime | None = None
    assumed: dict[str, Assumption] = field(default_factory=dict)
    generation: int = 0
    # (generation, heartbeat): derived views built at this generation hold this heartbeat or
    # a newer one (heartbeats swap the service without a touch, see ``state/beats.py``)
    beat_floor: tuple[int, datetime | None] | None = field(default=None, repr=False)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    changes: ChangeLog | None = field(default=None, repr=False)  # the table's, if any
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def key(self) -> tuple[str, str]:
        return (self.host, self.nodename)

    def touch(self) -> None:
        """Record a change so derived views rebuild."""
        self.generation += 1
        if self.changes is not None:
            self.changes.add(self)
