"""CPUWeigher: free vCPUs after the allocation ratio."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import HostCandidate
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.state.host_state import HostState


class CPUWeigher(BaseHostWeigher):
    name = "CPUWeigher"
    minval = 0
    aggregate_key = "cpu_weight_multiplier"

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.cpu_weight_multiplier)

    def weigh(self, host: HostCandidate, spec: RequestSpec) -> float:
        s = host.state
        return float(s.vcpus_total * s.cpu_allocation_ratio - s.vcpus_used)

    def weigh_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[float]:
        return [float(s.vcpus_total * s.cpu_allocation_ratio - s.vcpus_used) for s in states]
