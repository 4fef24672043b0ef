"""NumInstancesWeigher: instance count (off by default)."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import HostCandidate
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.state.host_state import HostState


class NumInstancesWeigher(BaseHostWeigher):
    name = "NumInstancesWeigher"
    minval = None
    aggregate_key = "num_instances_weight_multiplier"

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.num_instances_weight_multiplier)

    def weigh(self, host: HostCandidate, spec: RequestSpec) -> float:
        s = host.state
        return float(s.num_instances)

    def weigh_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[float]:
        return [float(s.num_instances) for s in states]
