"""AggregateIoOpsFilter: IoOpsFilter with the threshold from aggregate metadata (minimum)."""

from __future__ import annotations

from asyncsched.scheduling.filters.io_ops_filter import IoOpsFilter
from asyncsched.state.host_state import HostState


class AggregateIoOpsFilter(IoOpsFilter):
    name = "AggregateIoOpsFilter"

    def limit(self, state: HostState) -> int:
        return self.aggregate_limit(state)
