"""AllHostsFilter: a no-op that passes every host."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.state.host_state import HostState


class AllHostsFilter(BaseHostFilter):
    name = "AllHostsFilter"
    run_filter_once_per_request = True

    def is_active(self, spec: RequestSpec) -> bool:
        return False

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        return None

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return None

    def filter_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[str | None]:
        return [None] * len(states)
