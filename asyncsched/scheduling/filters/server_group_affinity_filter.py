"""ServerGroupAffinityFilter: hosts already used by the group, if any."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.objects.models import InstanceGroup, RequestSpec
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.state.host_state import HostState


def _affinity(group: InstanceGroup | None) -> bool:
    if group is None:
        return False
    policies = group.policies or ((group.policy,) if group.policy else ())
    return "affinity" in policies


class ServerGroupAffinityFilter(BaseHostFilter):
    """Active only for groups whose policies include ``affinity`` and that have hosts."""

    name = "ServerGroupAffinityFilter"

    def is_active(self, spec: RequestSpec) -> bool:
        return _affinity(spec.instance_group)

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        group = spec.instance_group
        if not _affinity(group) or group is None or not group.hosts:
            return None
        return None if state.host in group.hosts else "affinity"

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)

    def filter_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[str | None]:
        group = spec.instance_group
        if not _affinity(group) or group is None or not group.hosts:
            return [None] * len(states)
        hosts = frozenset(group.hosts)
        return [None if s.host in hosts else "affinity" for s in states]
