"""The mirror's refresh figures (p50, max: the lag bound) are its incremental refreshes';
the first full load is ``load_ms``, counted apart (issue #24: at 100,000 providers the load
is seconds, and counting it made the reported "longest refresh" the load's duration)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import pytest

from asyncsched.state.placement_mirror import MirrorState, PlacementMirror, mirror
from asyncsched.state.placement_mirror.reader import Names, RefreshResult
from tests.support.mirror_data import Cloud


class FakeTime:
    """Stands in for the ``time`` module the mirror times its refreshes with."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now


class FakeConn:
    def is_closed(self) -> bool:
        return False

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[None]:
        yield

    async def close(self) -> None:
        pass

    def terminate(self) -> None:
        pass


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(mirror, "time", fake)
    state = Cloud()
    state.compute("a", vcpu=1)
    snapshot = state.state()

    async def connect(*_: Any, **__: Any) -> FakeConn:
        return FakeConn()

    async def read(_conn: Any, old: Any, names: Any, prints: Any = None) -> RefreshResult:
        fake.now += 3.6 if old is None else 0.05  # a load takes 3.6 s, a refresh 50 ms
        return RefreshResult(snapshot, Names({}, {}), 1 if old is None else 0, 0)

    monkeypatch.setattr(mirror, "connect", connect)
    monkeypatch.setattr(mirror, "read", read)
    return fake


async def test_the_load_is_not_counted_as_a_refresh(clock: FakeTime) -> None:
    m = PlacementMirror(
        "postgresql://root@127.0.0.1:1/placement", interval=3600, max_age=1e9, query_timeout=5
    )
    await m.start()
    try:
        h = m.health()
        assert h["load_ms"] == pytest.approx(3600.0)
        assert h["refresh_ms_p50"] is None and h["refresh_ms_max"] == 0.0
        for _ in range(3):
            await m.refresh()
        h = m.health()
        assert h["refreshes"] == 4  # the load included: it is a snapshot applied
        assert h["refresh_ms_max"] == pytest.approx(50.0)
        assert h["refresh_ms_p50"] == pytest.approx(50.0)
        assert h["load_ms"] == pytest.approx(3600.0)
    finally:
        await m.close()


async def test_a_load_after_a_failed_start_is_the_load_too(clock: FakeTime) -> None:
    m = PlacementMirror(
        "postgresql://root@127.0.0.1:1/placement", interval=3600, max_age=1e9, query_timeout=5
    )
    await m.refresh()  # what the background loop does when start() could not load
    await m.refresh()
    h = m.health()
    assert h["load_ms"] == pytest.approx(3600.0)
    assert h["refresh_ms_max"] == pytest.approx(50.0)


def test_the_next_refresh_is_one_interval_after_the_last_began(clock: FakeTime) -> None:
    """So a change waits at most an interval plus one refresh (the lag bound), not an
    interval plus two (a whole interval after the refresh that missed it ended)."""
    m = PlacementMirror(
        "postgresql://root@127.0.0.1:1/placement", interval=0.5, max_age=1e9, query_timeout=5
    )
    assert m._next_delay(0, None) == 0.5  # after the load
    assert m._next_delay(0, clock.now - 0.2) == pytest.approx(0.3)  # a 200 ms refresh
    assert m._next_delay(0, clock.now - 0.7) == pytest.approx(0.05)  # longer: a tenth
    assert m._next_delay(2, clock.now - 0.2) == 2.0  # backing off after failures
    assert m._next_delay(9, clock.now) == 10.0


def test_over_capacity_is_watched_on_the_providers_a_refresh_replaced() -> None:
    c = Cloud()
    a = c.compute("a", vcpu=1)
    b = c.compute("b", vcpu=1)
    s0 = c.state()
    m = PlacementMirror(
        "postgresql://root@127.0.0.1:1/placement", interval=0.5, max_age=1e9, query_timeout=5
    )

    def apply(state: MirrorState) -> None:
        m._apply(RefreshResult(state, Names({}, {}), 0, 0), 0.0, 1.0)

    m._apply(RefreshResult(s0, Names({}, {}), 2, 0), 0.0, 1.0, load=True)
    over = dict(s0.providers)
    over[a] = replace(over[a], used={"VCPU": 2})  # another scheduler's claim went through
    s1 = s0.with_providers(over, [a])
    apply(s1)
    assert (m.health()["providers_over_capacity"], m.health()["over_capacity_found"]) == (1, 1)
    apply(s1)  # the same state again (nothing moved): nothing counted twice
    fits = dict(over)
    fits[a] = replace(over[a], used={"VCPU": 1})
    fits[b] = replace(over[b], used={"VCPU": 3})
    apply(s1.with_providers(fits, [a, b]))
    assert (m.health()["providers_over_capacity"], m.health()["over_capacity_found"]) == (1, 2)
    apply(MirrorState.build(fits, s0.known_traits, s0.known_classes))  # rebuilt: all looked at
    assert (m.health()["providers_over_capacity"], m.health()["over_capacity_found"]) == (1, 2)
