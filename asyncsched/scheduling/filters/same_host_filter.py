"""SameHostFilter: hint ``same_host``: at least one of those instances on the host."""

from __future__ import annotations

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.scheduling.filters.different_host_filter import hint_uuids
from asyncsched.state.host_state import HostState


class SameHostFilter(BaseHostFilter):
    name = "SameHostFilter"
    run_filter_once_per_request = True

    def is_active(self, spec: RequestSpec) -> bool:
        return bool(hint_uuids(spec, "same_host"))

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        uuids = hint_uuids(spec, "same_host")
        return "same-host" if uuids and uuids.isdisjoint(state.instances) else None

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)
