"""AggregateNumInstancesFilter: NumInstancesFilter with a per-aggregate threshold (minimum)."""

from __future__ import annotations

from asyncsched.scheduling.aggregate_utils import aggregate_values_from_key, validate_num_values
from asyncsched.scheduling.filters.num_instances_filter import NumInstancesFilter
from asyncsched.state.host_state import HostState


class AggregateNumInstancesFilter(NumInstancesFilter):
    name = "AggregateNumInstancesFilter"

    def max_instances(self, state: HostState) -> int:
        default = self.config.filter_scheduler.max_instances_per_host
        vals = aggregate_values_from_key(state, "max_instances_per_host")
        try:
            return validate_num_values(vals, default, int)
        except ValueError:
            return default
