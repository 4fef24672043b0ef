"""PCIWeigher: keep PCI hosts free: fewer free PCI devices weigh more."""

from __future__ import annotations

from asyncsched.scheduling.columns import Column
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.state.host_state import HostState

MAX_DEVS = 100


def pci_score(s: HostState) -> float:
    """nova's PCIWeigher score: MAX_DEVS minus the free devices (at least 1)."""
    free = sum(p.count for p in s.pci_pools) if s.pci_pools else 0
    return float(MAX_DEVS - min(free, MAX_DEVS - 1))


class PCIWeigher(BaseHostWeigher):
    name = "PCIWeigher"
    aggregate_key = "pci_weight_multiplier"
    column = Column("pci_score", pci_score)

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.pci_weight_multiplier)
