"""What one instance was given on a host's NUMA cells and PCI pools, and the host it
was given on as the arithmetic sees it (no dependency on the host-state cache)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from asyncsched.objects.host_resources import HostNUMATopology, PciDevicePool
from asyncsched.objects.models import (
    InstanceNUMATopology,
    InstancePCIRequest,
    NUMATopologyLimits,
)


class NumaPciHost(Protocol):
    """The parts of a host state the NUMA/PCI consume reads and updates."""

    nodename: str
    numa_topology: HostNUMATopology | None
    pci_pools: tuple[PciDevicePool, ...]

    def touch(self) -> None: ...


@dataclass(frozen=True, slots=True)
class PlacedNumaPci:
    """What one instance was given on a host's NUMA cells and PCI pools.

    Why: pending consumption must be re-applied over whatever the next refresh reads (and
    taken out again on release), so we keep the usage itself, not the host values it led to.
    ``fitted`` is the guest topology as placed (host cell ids, pinning, page size, memory);
    ``requested``/``limits`` let a re-apply that no longer fits be fitted afresh;
    ``numa_before``/``pci_before`` are the host's values just before this consume, the base
    to rebuild from when the host has no DB snapshot.
    """

    fitted: InstanceNUMATopology | None = None
    pci_requests: tuple[InstancePCIRequest, ...] = ()
    provider_mapping: Mapping[str, tuple[str, ...]] | None = None
    requested: InstanceNUMATopology | None = None
    limits: NUMATopologyLimits | None = None
    numa_before: HostNUMATopology | None = None
    pci_before: tuple[PciDevicePool, ...] | None = None
    # The host values right after this consume (None: that part unchanged); what
    # ``place_numa_pci`` returns carries them, the cache's assumptions do not.
    numa_after: HostNUMATopology | None = None
    pci_after: tuple[PciDevicePool, ...] | None = None

    @property
    def empty(self) -> bool:
        """Nothing NUMA/PCI was placed (no NUMA request fitted and no PCI request)."""
        return self.fitted is None and not self.pci_requests
