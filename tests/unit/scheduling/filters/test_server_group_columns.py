"""The server-group filter and weighers over many hosts answer as they do host by host.

Their columnar forms skip hosts that hold no group member; whatever the members, the hosts'
instances, the instance being moved and ``max_server_per_host`` (0 and malformed included),
the answer must be the per-host rule's.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from asyncsched.objects.models import InstanceGroup
from asyncsched.scheduling.filters.base import HostCandidate
from asyncsched.scheduling.filters.server_group_anti_affinity_filter import (
    ServerGroupAntiAffinityFilter,
)
from asyncsched.scheduling.weighers.soft_affinity import members_on_hosts
from tests.support.sched_helpers import config, host, spec

UUIDS = st.sampled_from([f"i{n}" for n in range(8)])
RULES: st.SearchStrategy[dict[str, str]] = st.one_of(
    st.just({}),
    st.sampled_from(["0", "1", "2", "3", "-1", "x"]).map(lambda v: {"max_server_per_host": v}),
)


@settings(max_examples=300, deadline=None)
@given(
    members=st.lists(UUIDS, max_size=6),
    hosts=st.lists(st.sets(UUIDS, max_size=5), min_size=1, max_size=8),
    moving=st.one_of(st.none(), UUIDS),
    rules=RULES,
    policy=st.sampled_from(["anti-affinity", "soft-anti-affinity", "soft-affinity", "affinity"]),
)
def test_columns_answer_as_the_per_host_rule(
    members: list[str],
    hosts: list[set[str]],
    moving: str | None,
    rules: dict[str, str],
    policy: str,
) -> None:
    group = InstanceGroup(
        uuid="g1", policy=policy, policies=(policy,), members=tuple(members), rules=rules
    )
    s = spec(instance_group=group, instance_uuid=moving)
    states = [host(f"h{i}", instances=set(inst)) for i, inst in enumerate(hosts)]
    f = ServerGroupAntiAffinityFilter(config())
    assert f.filter_states(states, s) == [f.state_passes(h, s) for h in states]
    assert f.filter_states(states, s) == [f.host_passes(HostCandidate(h), s) for h in states]
    for weigher_policy in ("soft-affinity", "soft-anti-affinity"):
        counted = [
            float(len(set(members) & inst)) if policy == weigher_policy else 0.0 for inst in hosts
        ]
        assert members_on_hosts(states, s, weigher_policy) == counted
