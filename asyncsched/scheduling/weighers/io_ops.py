"""IoOpsWeigher: concurrent I/O-heavy tasks (default multiplier -1 prefers idle hosts)."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import HostCandidate
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.state.host_state import HostState


class IoOpsWeigher(BaseHostWeigher):
    name = "IoOpsWeigher"
    minval = 0
    aggregate_key = "io_ops_weight_multiplier"

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.io_ops_weight_multiplier)

    def weigh(self, host: HostCandidate, spec: RequestSpec) -> float:
        s = host.state
        return float(s.num_io_ops)

    def weigh_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[float]:
        return [float(s.num_io_ops) for s in states]
