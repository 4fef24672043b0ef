"""AggregateNumInstancesFilter: NumInstancesFilter with a per-aggregate threshold (minimum)."""

from __future__ import annotations

from asyncsched.scheduling.filters.num_instances_filter import NumInstancesFilter
from asyncsched.state.host_state import HostState


class AggregateNumInstancesFilter(NumInstancesFilter):
    name = "AggregateNumInstancesFilter"

    def limit(self, state: HostState) -> int:
        return self.aggregate_limit(state)
