"""AggregateIoOpsFilter: IoOpsFilter with the threshold from aggregate metadata (minimum)."""

from __future__ import annotations

from asyncsched.scheduling.aggregate_utils import aggregate_values_from_key, validate_num_values
from asyncsched.scheduling.filters.io_ops_filter import IoOpsFilter
from asyncsched.state.host_state import HostState


class AggregateIoOpsFilter(IoOpsFilter):
    name = "AggregateIoOpsFilter"

    def max_io_ops(self, state: HostState) -> int:
        default = self.config.filter_scheduler.max_io_ops_per_host
        vals = aggregate_values_from_key(state, "max_io_ops_per_host")
        try:
            return validate_num_values(vals, default, int)
        except ValueError:
            return default
