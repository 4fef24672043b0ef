"""DiskWeigher: free disk."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import HostCandidate
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.state.host_state import HostState


class DiskWeigher(BaseHostWeigher):
    name = "DiskWeigher"
    minval = 0
    aggregate_key = "disk_weight_multiplier"

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.disk_weight_multiplier)

    def weigh(self, host: HostCandidate, spec: RequestSpec) -> float:
        s = host.state
        return float(s.free_disk_mb)

    def weigh_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[float]:
        return [float(s.free_disk_mb) for s in states]
