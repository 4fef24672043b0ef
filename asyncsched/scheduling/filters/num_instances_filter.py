"""NumInstancesFilter: fewer than max_instances_per_host instances."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.columns import ColumnMask, attribute, threshold_mask
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate, inherits
from asyncsched.state.host_state import HostState


class NumInstancesFilter(BaseHostFilter):
    name = "NumInstancesFilter"

    def max_instances(self, state: HostState) -> int:
        return self.config.filter_scheduler.max_instances_per_host

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        return None if state.num_instances < self.max_instances(state) else "num-instances"

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)

    def filter_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[str | None]:
        if type(self).max_instances is not NumInstancesFilter.max_instances:
            return super().filter_states(states, spec)
        limit = self.config.filter_scheduler.max_instances_per_host
        return [None if s.num_instances < limit else "num-instances" for s in states]

    def column_mask(self) -> ColumnMask | None:
        if not inherits(self, NumInstancesFilter, "max_instances"):
            return None  # e.g. the Aggregate* subclass: the limit is per host
        limit = self.config.filter_scheduler.max_instances_per_host
        return threshold_mask(attribute("num_instances"), limit, "num-instances")
