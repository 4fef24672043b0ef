"""DifferentHostFilter: hint ``different_host``: none of those instances on the host."""

from __future__ import annotations

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.state.host_state import HostState


def hint_uuids(spec: RequestSpec, name: str) -> frozenset[str]:
    value = spec.get_scheduler_hint(name)
    if not value:
        return frozenset()
    return frozenset([value] if isinstance(value, str) else value)


class DifferentHostFilter(BaseHostFilter):
    name = "DifferentHostFilter"
    run_filter_once_per_request = True

    def is_active(self, spec: RequestSpec) -> bool:
        return bool(hint_uuids(spec, "different_host"))

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        uuids = hint_uuids(spec, "different_host")
        return "different-host" if uuids and not uuids.isdisjoint(state.instances) else None

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)
