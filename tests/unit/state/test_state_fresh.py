"""state.fresh without a database: shared reads and the services held disabled, forced down
or silent."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from asyncsched.state.fresh import SWEEP_MAX, FreshState, SharedRead, refresh_held, sweep_interval
from asyncsched.state.host_state import ServiceInfo


class Reads:
    """A read the test lets finish; counts starts."""

    def __init__(self) -> None:
        self.started = 0
        self.gates: list[asyncio.Event] = []

    async def __call__(self) -> None:
        self.started += 1
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def spawn(coro: Any) -> asyncio.Task[Any]:
    return asyncio.get_running_loop().create_task(coro)


async def test_callers_during_a_read_share_the_next_one() -> None:
    reads = Reads()
    shared = SharedRead(reads, spawn)
    first = shared.request()
    await asyncio.sleep(0)
    assert reads.started == 1 and shared.running
    # arrived while the first runs: one later read for all of them, not the running one
    later = {shared.request() for _ in range(10)}
    assert len(later) == 1 and first not in later
    (second,) = later
    await asyncio.sleep(0)
    assert reads.started == 1  # it starts only once the first is done
    reads.gates[0].set()
    assert first is not None
    await first
    await settle()
    assert reads.started == 2 and not second.done()  # type: ignore[union-attr]
    third = shared.request()  # arrived during the second: waits for a third
    assert third is not second
    reads.gates[1].set()
    await second  # type: ignore[misc]
    await settle()
    reads.gates[2].set()
    assert third is not None
    await third
    assert reads.started == 3 and not shared.running


async def test_a_caller_that_stops_waiting_does_not_cancel_the_read() -> None:
    reads = Reads()
    shared = SharedRead(reads, spawn)
    task = shared.request()
    assert task is not None
    _, late = await asyncio.wait({task}, timeout=0.01)
    assert late == {task} and not task.cancelled()
    reads.gates[0].set()
    await task
    assert reads.started == 1


def svc(i: int, beat_age: float | None, **kw: Any) -> ServiceInfo:
    now = datetime.now(UTC)
    beat = None if beat_age is None else now - timedelta(seconds=beat_age)
    return ServiceInfo(id=i, host=f"h{i}", last_seen_up=beat, **kw)


async def test_held_sets() -> None:
    """Silent: no heartbeat, or one that may pass service_down_time (60 s) before the next
    refresh (horizon 2.5 x 10 s): the fresh read reads their heartbeats."""
    services = [
        svc(1, 5),
        svc(2, 5, disabled=True),
        svc(3, 5, forced_down=True),
        svc(4, None),
        svc(5, 40),  # 40 s old: down in 20 s, before two more refreshes
        svc(6, 30),  # down in 30 s: the refresh in between lists it then
        svc(7, 600),
    ]
    fresh = FreshState()
    await refresh_held(fresh, services, down_time=60, interval=10)
    assert (fresh.disabled, fresh.forced, fresh.silent) == ({2}, {3}, {4, 5, 7})
    assert fresh.held_until > datetime.now(UTC).timestamp() + 24


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_overlapping_callers_share_reads_started_the_spacing_apart() -> None:
    reads = Reads()
    clock = Clock()
    shared = SharedRead(reads, spawn, spacing=lambda: 0.05, clock=clock)
    first = shared.request()
    await asyncio.sleep(0)
    assert reads.started == 1
    clock.now += 0.01
    second = shared.request()  # arrived while the first runs: the reads are spaced now
    reads.gates[0].set()
    assert first is not None and second is not None
    await first
    await settle()
    # the first ended 10 ms after it started: the next waits for the rest of the 50 ms, and
    # every caller of that time joins it (each still gets a read begun after it came)
    assert reads.started == 1 and not shared.running
    assert {shared.request() for _ in range(5)} == {second}
    await asyncio.sleep(0.06)  # the 40 ms left, on the loop's clock
    assert reads.started == 2 and shared.running
    clock.now += 0.05
    reads.gates[1].set()
    await second
    assert shared.reads == 2


async def test_a_lone_caller_is_never_held_back() -> None:
    reads = Reads()
    clock = Clock()
    shared = SharedRead(reads, spawn, spacing=lambda: 0.05, clock=clock)
    for n in (1, 2, 3):
        task = shared.request()
        await asyncio.sleep(0)
        assert reads.started == n and shared.running  # at once, however soon after the last
        reads.gates[-1].set()
        assert task is not None
        await task
        clock.now += 0.001
    assert shared.reads == 3


def test_a_sweep_every_quarter_of_down_time_at_most_15_s() -> None:
    """nova's default 60 s: every 15 s; a day (bench_candidates) still every 15 s."""
    assert sweep_interval(60.0) == 15.0
    assert sweep_interval(86400.0) == SWEEP_MAX == 15.0
    assert sweep_interval(8.0) == 2.0
