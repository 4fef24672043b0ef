"""ServerGroupAntiAffinityFilter: at most max_server_per_host group members per host."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.scheduling.members import MemberIndex
from asyncsched.state.host_state import HostState


class ServerGroupAntiAffinityFilter(BaseHostFilter):
    """Active only for groups with policy ``anti-affinity``."""

    name = "ServerGroupAntiAffinityFilter"

    def is_active(self, spec: RequestSpec) -> bool:
        group = spec.instance_group
        return group is not None and group.policy == "anti-affinity"

    def _passes(
        self, state: HostState, uuid: str | None, members: frozenset[str], limit: int
    ) -> str | None:
        if uuid is not None and uuid in state.instances:
            return None  # a move: the instance's own source host is fine
        if len(members.intersection(state.instances)) < limit:
            return None
        return "anti-affinity"

    def fails_on_members(
        self, index: MemberIndex, spec: RequestSpec
    ) -> tuple[list[int], str] | None:
        """The hosts holding ``limit`` members or more, but not the moved instance (with a
        limit below 1 every host fails: the per-host form answers that)."""
        group = spec.instance_group
        if group is None or group.policy != "anti-affinity":
            return [], "anti-affinity"
        limit = group.max_server_per_host if "max_server_per_host" in group.rules else 1
        if limit < 1:
            return None
        uuid, states = spec.instance_uuid, index.states
        failing = [
            i
            for i, n in index.counts(group.members).items()
            if n >= limit and (uuid is None or uuid not in states[i].instances)
        ]
        return failing, "anti-affinity"

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        if not self.is_active(spec):
            return None
        group = spec.instance_group
        assert group is not None
        limit = group.max_server_per_host if "max_server_per_host" in group.rules else 1
        return self._passes(state, spec.instance_uuid, frozenset(group.members), limit)

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)

    def filter_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[str | None]:
        group = spec.instance_group
        if group is None or group.policy != "anti-affinity":
            return [None] * len(states)
        limit = group.max_server_per_host if "max_server_per_host" in group.rules else 1
        members = frozenset(group.members)
        uuid = spec.instance_uuid
        if limit < 1:
            return [self._passes(s, uuid, members, limit) for s in states]
        # Most hosts hold no member: isdisjoint answers them without a call or a new set
        # (a 1,000-instance anti-affinity multi-create asks this of every host 1,000 times).
        disjoint = members.isdisjoint
        return [
            None if disjoint(s.instances) else self._passes(s, uuid, members, limit) for s in states
        ]
