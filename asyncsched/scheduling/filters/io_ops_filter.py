"""IoOpsFilter: fewer than max_io_ops_per_host concurrent I/O-heavy tasks."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.columns import ColumnMask, attribute, threshold_mask
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate, inherits
from asyncsched.state.host_state import HostState


class IoOpsFilter(BaseHostFilter):
    name = "IoOpsFilter"

    def max_io_ops(self, state: HostState) -> int:
        return self.config.filter_scheduler.max_io_ops_per_host

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        return None if state.num_io_ops < self.max_io_ops(state) else "io-ops"

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)

    def filter_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[str | None]:
        if type(self).max_io_ops is not IoOpsFilter.max_io_ops:
            return super().filter_states(states, spec)
        limit = self.config.filter_scheduler.max_io_ops_per_host
        return [None if s.num_io_ops < limit else "io-ops" for s in states]

    def column_mask(self) -> ColumnMask | None:
        if not inherits(self, IoOpsFilter, "max_io_ops"):
            return None  # e.g. the Aggregate* subclass: the limit is per host
        limit = self.config.filter_scheduler.max_io_ops_per_host
        return threshold_mask(attribute("num_io_ops"), limit, "io-ops")
