"""Host-side NUMA topology and PCI device pools, as compute nodes report them.

Parsed once per refresh from ``compute_nodes.numa_topology`` (a NUMATopology object primitive)
and ``compute_nodes.pci_stats`` (a PciDevicePoolList primitive), so no request ever decodes
JSON. Values are immutable; consumption builds new values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class NUMAPagesTopology:
    size_kb: int
    total: int
    used: int = 0
    reserved: int = 0

    @property
    def free(self) -> int:
        return self.total - self.used - self.reserved


@dataclass(frozen=True, slots=True)
class HostNUMACell:
    id: int
    cpuset: frozenset[int] = frozenset()  # CPUs for shared (floating) instances
    pcpuset: frozenset[int] = frozenset()  # CPUs for dedicated (pinned) instances
    memory: int = 0  # MB
    cpu_usage: int = 0
    memory_usage: int = 0
    pinned_cpus: frozenset[int] = frozenset()
    siblings: tuple[frozenset[int], ...] = ()
    mempages: tuple[NUMAPagesTopology, ...] = ()
    network_metadata_physnets: frozenset[str] = frozenset()
    network_metadata_tunneled: bool = False
    socket: int | None = None


@dataclass(frozen=True, slots=True)
class HostNUMATopology:
    cells: tuple[HostNUMACell, ...] = ()


@dataclass(frozen=True, slots=True)
class PciDevicePool:
    vendor_id: str
    product_id: str
    numa_node: int | None
    count: int
    tags: Mapping[str, str] = field(default_factory=dict)  # dev_type, physical_network, ...
