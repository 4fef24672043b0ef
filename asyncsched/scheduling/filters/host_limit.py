"""The rule IoOpsFilter and NumInstancesFilter share: a host passes while one of its counters
is below a ``[filter_scheduler]`` limit. Their Aggregate* forms read the limit per host from
the aggregate metadata key of the same name (the smallest value; the option if none is valid).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import ClassVar

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.aggregate_utils import aggregate_values_from_key, validate_num_values
from asyncsched.scheduling.columns import ColumnMask, attribute, threshold_mask
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate, inherits
from asyncsched.state.host_state import HostState


class HostLimitFilter(BaseHostFilter):
    """Passes a host while ``HostState.<counter>`` is below ``limit(host)``; fails ``reason``."""

    counter: ClassVar[str]  # the HostState attribute counted
    option: ClassVar[str]  # the [filter_scheduler] option, and the aggregate metadata key
    reason: ClassVar[str]

    def configured_limit(self) -> int:
        limit: int = getattr(self.config.filter_scheduler, self.option)
        return limit

    def limit(self, state: HostState) -> int:
        return self.configured_limit()

    def aggregate_limit(self, state: HostState) -> int:
        """``limit`` of the Aggregate* forms: the host's aggregates may lower or raise it."""
        default = self.configured_limit()
        vals = aggregate_values_from_key(state, self.option)
        try:
            return validate_num_values(vals, default, int)
        except ValueError:
            return default

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        return None if getattr(state, self.counter) < self.limit(state) else self.reason

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)

    def filter_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[str | None]:
        if type(self).limit is not HostLimitFilter.limit:
            return super().filter_states(states, spec)
        limit, count, reason = self.configured_limit(), attrgetter(self.counter), self.reason
        return [None if count(s) < limit else reason for s in states]

    def column_mask(self) -> ColumnMask | None:
        if not inherits(self, HostLimitFilter, "limit"):
            return None  # e.g. the Aggregate* forms: the limit is per host
        return threshold_mask(attribute(self.counter), self.configured_limit(), self.reason)
