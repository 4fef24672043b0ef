"""PCIWeigher: keep PCI hosts free: fewer free PCI devices weigh more."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import HostCandidate
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.state.host_state import HostState

MAX_DEVS = 100


def _score(s: HostState) -> float:
    free = sum(p.count for p in s.pci_pools) if s.pci_pools else 0
    return float(MAX_DEVS - min(free, MAX_DEVS - 1))


class PCIWeigher(BaseHostWeigher):
    name = "PCIWeigher"
    aggregate_key = "pci_weight_multiplier"

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.pci_weight_multiplier)

    def weigh(self, host: HostCandidate, spec: RequestSpec) -> float:
        return _score(host.state)

    def weigh_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[float]:
        return [_score(s) for s in states]
