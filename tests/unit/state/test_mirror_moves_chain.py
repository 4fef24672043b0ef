"""A state made by ``MirrorState.with_providers`` names what moved since each of the last
``SINCE_DEPTH`` states it came from, so an answer kept for a query not asked for a few
refreshes is patched from the state it was made on."""

from __future__ import annotations

from dataclasses import replace

from asyncsched.state.placement_mirror import MirrorState
from asyncsched.state.placement_mirror.model import SINCE_DEPTH
from tests.support.mirror_data import Cloud


def test_moved_since_is_the_union_of_the_steps_back_to_that_state() -> None:
    c = Cloud()
    ids = [c.compute(f"h{i}", vcpu=8) for i in range(6)]
    states = [c.state()]
    steps = [{ids[0]}, set(), {ids[1], ids[2]}, {ids[0], ids[5]}]
    for moved in steps:
        providers = dict(states[-1].providers)
        for i in moved:
            providers[i] = replace(providers[i], used={"VCPU": len(states)})
        states.append(states[-1].with_providers(providers, moved))
    last = states[-1]
    for back in range(1, len(states)):
        want = frozenset().union(*steps[len(steps) - back :])
        assert last.moved_since(states[-1 - back]) == want
    assert states[2].moved_since(states[3]) is None  # a later state: not known
    other = c.state()  # built anew, with the same providers: not in the chain
    assert last.moved_since(other) is None and other.moved_since(states[0]) is None


def test_the_chain_is_bounded_and_forgets_the_oldest_state() -> None:
    c = Cloud()
    a = c.compute("a", vcpu=8)
    first = state = c.state()
    kept = []
    for n in range(SINCE_DEPTH + 1):
        state = state.with_providers(dict(state.providers), [a] if n == 0 else [])
        kept.append(state)
    assert len(state.since) == SINCE_DEPTH
    assert state.moved_since(first) is None  # SINCE_DEPTH + 1 steps back
    assert state.moved_since(kept[0]) == frozenset()  # SINCE_DEPTH steps back, a not among them
    assert kept[-2].moved_since(first) == frozenset({a})
    assert isinstance(state, MirrorState)
