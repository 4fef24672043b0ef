"""Server groups cost the group, not the cloud: after the request's first look at its hosts,
placing one more instance looks only at the hosts touched since (the one just consumed), never
again at every host; the hosts chosen are the per-host rule's."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from asyncsched.objects.models import InstanceGroup, RequestSpec
from asyncsched.scheduling.engine import DecisionEngine
from asyncsched.scheduling.filters.server_group_anti_affinity_filter import (
    ServerGroupAntiAffinityFilter,
)
from asyncsched.scheduling.members import MemberIndex
from asyncsched.scheduling.weighers.soft_affinity import ServerGroupSoftAffinityWeigher
from asyncsched.state.host_state import ChangeLog, HostState
from tests.support.sched_helpers import config, host, spec

HOSTS = 200
COUNT = 40


def _never(*_: Any) -> Any:
    raise AssertionError("the per-host form ran over every host")


def _cloud(log: ChangeLog | None) -> list[HostState]:
    states = [host(f"h{i:03d}", changes=log) for i in range(HOSTS)]
    states[7].instances.add("old-member")  # a member placed before this request
    return states


def _boot(policy: str, states: list[HostState], rules: dict[str, str]) -> list[str]:
    conf = config()
    eng = DecisionEngine(
        conf, [ServerGroupAntiAffinityFilter(conf)], [ServerGroupSoftAffinityWeigher(conf)]
    )
    group = InstanceGroup(uuid="g", policy=policy, members=("old-member",), rules=rules)
    s: RequestSpec = spec(instance_group=group)
    req = eng.start(states)
    chosen: list[str] = []
    for i in range(COUNT):
        uuid = f"new-{i}"
        s = dataclasses.replace(s, instance_uuid=uuid)
        if not req.filter(s, i):
            break
        h = states[req.pick(s).chosen_index]
        chosen.append(h.host)
        h.instances.add(uuid)
        h.touch()
        eng.refresh(h)
        g = s.instance_group
        assert g is not None
        s = dataclasses.replace(
            s, instance_group=dataclasses.replace(g, members=(*g.members, uuid))
        )
    index = req.member_index()
    # one full look when the request began, then only the host each instance was placed on
    assert index.visited == HOSTS + len(chosen) - 1
    return chosen


@pytest.mark.parametrize("log", [ChangeLog(), None], ids=["changelog", "generations"])
def test_anti_affinity_looks_only_at_touched_hosts(
    log: ChangeLog | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ServerGroupAntiAffinityFilter, "filter_states", _never)
    chosen = _boot("anti-affinity", _cloud(log), {"max_server_per_host": "2"})
    assert len(chosen) == COUNT
    assert chosen.count("h007") <= 1  # it already holds a member
    assert max(chosen.count(h) for h in set(chosen)) <= 2


@pytest.mark.parametrize("log", [ChangeLog(), None], ids=["changelog", "generations"])
def test_soft_affinity_looks_only_at_touched_hosts(
    log: ChangeLog | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ServerGroupSoftAffinityWeigher, "weigh_states", _never)
    # every instance joins the host already holding a member
    assert _boot("soft-affinity", _cloud(log), {}) == ["h007"] * COUNT


def test_index_follows_changes_it_did_not_make() -> None:
    """A member arriving or leaving on any host (a refresh) is seen on the next look."""
    states = _cloud(ChangeLog())
    index = MemberIndex(states)
    assert index.counts(("old-member", "x")) == {7: 1}
    states[9].instances.add("x")
    states[9].touch()
    states[7].instances.discard("old-member")
    states[7].touch()
    assert index.counts(("old-member", "x")) == {9: 1}
    # a new member found on no touched host: a full look finds it where it is
    states[3].instances.add("y")
    assert index.counts(("old-member", "x", "y")) == {3: 1, 9: 1}
