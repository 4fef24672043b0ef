"""RPCCounters / RPCStats: one field list, counted by attribute, read as a frozen snapshot."""

from __future__ import annotations

import dataclasses

import pytest

from asyncsched.common.health import Snapshot
from asyncsched.rpc.stats import RPCCounters, RPCStats


def test_the_snapshot_has_the_counters_fields_in_order_all_ints_at_zero() -> None:
    names = [f.name for f in dataclasses.fields(RPCCounters)]
    assert [f.name for f in dataclasses.fields(RPCStats)] == names
    assert RPCStats().as_json() == dict.fromkeys(names, 0)
    assert isinstance(RPCStats(), Snapshot)


def test_a_snapshot_is_frozen_and_does_not_follow_later_increments() -> None:
    counters = RPCCounters()
    counters.received += 2
    counters.replies_late += 1
    snap = counters.snapshot()
    counters.received += 1
    assert (snap.received, snap.replies_late, counters.received) == (2, 1, 3)
    assert snap["received"] == 2 and dict(snap)["replies_late"] == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.received = 5  # type: ignore[misc]


def test_a_counter_that_is_not_a_field_is_refused() -> None:
    counters = RPCCounters()
    with pytest.raises(AttributeError):  # slots: no silently new attribute
        counters.recieved = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        RPCStats(recieved=1)  # type: ignore[call-arg]
