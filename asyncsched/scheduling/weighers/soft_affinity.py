"""ServerGroupSoftAffinityWeigher: members of a soft-affinity group already on the host."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.candidate import HostCandidate
from asyncsched.scheduling.columns import FloatArray, IntArray
from asyncsched.scheduling.members import MemberIndex, positions
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.state.host_state import HostState


def members_on_hosts(states: Sequence[HostState], spec: RequestSpec, policy: str) -> list[float]:
    group = spec.instance_group
    if group is None or group.policy != policy:
        return [0.0] * len(states)
    members = frozenset(group.members)
    disjoint = members.isdisjoint  # most hosts hold no member: no new set for them
    return [
        0.0 if disjoint(s.instances) else float(len(members.intersection(s.instances)))
        for s in states
    ]


class ServerGroupSoftAffinityWeigher(BaseHostWeigher):
    name = "ServerGroupSoftAffinityWeigher"
    aggregate_key = "soft_affinity_weight_multiplier"
    policy = "soft-affinity"
    sign = 1.0

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.soft_affinity_weight_multiplier)

    def is_active(self, spec: RequestSpec) -> bool:
        group = spec.instance_group
        return group is not None and group.policy == self.policy and super().is_active(spec)

    def weigh(self, host: HostCandidate, spec: RequestSpec) -> float:
        return self.sign * members_on_hosts([host.state], spec, self.policy)[0]

    def weigh_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[float]:
        sign = self.sign
        return [sign * v for v in members_on_hosts(states, spec, self.policy)]

    def weigh_members(self, index: MemberIndex, spec: RequestSpec, cur: IntArray) -> FloatArray:
        """The same scores from the request's index: only member hosts are looked at."""
        raw = np.zeros(len(cur))
        group = spec.instance_group
        if group is None or group.policy != self.policy:
            return raw
        counts = index.counts(group.members)
        bases = list(counts)
        at = positions(cur, bases)
        if len(at):
            raw[at] = [self.sign * counts[b] for b in cur[at].tolist()]
        return raw
