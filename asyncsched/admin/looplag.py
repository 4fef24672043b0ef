"""Event-loop holds: how late the loop wakes a timer, and the collector's pauses.

How late the loop wakes a timer is how long every request waited for it. One cause no code
path shows is Python's cyclic garbage collector: a collection of the oldest generation walks
every tracked object the service holds (the host table of a large cloud is millions), in one
piece, wherever an allocation happens to trigger it. ``gc.callbacks`` times each collection,
so an operator sees the pauses by generation beside the lag they cause.

A component of its own (started right after the admin endpoint) so the Service starts and
stops it like the rest and its figures appear in the health snapshot.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asyncsched.common.health import Snapshot
from asyncsched.common.tasks import cancel_and_wait

INTERVAL = 0.25  # seconds between samples: 4 wake-ups a second cost nothing measurable
MAX_PENDING = 10_000  # collector pauses kept between two samples (young ones run often)


@dataclass(frozen=True, slots=True)
class LoopLagHealth(Snapshot):
    """The latest and the largest event-loop lag seen, seconds."""

    last_s: float
    max_s: float
    gc_collections: tuple[int, int, int]  # by generation, since start
    gc_pause_s: tuple[float, float, float]  # time spent collecting, by generation
    gc_pause_max_s: float  # the longest single collection
    gc_pause_longest_s: tuple[float, float, float]  # the longest one of each generation
    gc_pause_max_cpu_s: float  # the longest collection's CPU time (below it: waits for a core)
    gc_pause_max_collected: int  # the unreachable objects the longest one found and freed


class LoopLagMonitor:
    name = "looplag"

    def __init__(
        self,
        observe: Callable[[float], None],
        *,
        observe_gc: Callable[[int, float], None] | None = None,
        interval: float = INTERVAL,
    ) -> None:
        self._observe = observe
        self._interval = interval
        self._task: asyncio.Task[None] | None = None
        self._last = 0.0
        self._max = 0.0
        self._gc = GCPauses(observe_gc)

    async def start(self) -> None:
        self._gc.install()
        self._task = asyncio.create_task(self._run(), name="looplag")

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        self._gc.remove()

    def health(self) -> LoopLagHealth:
        g = self._gc
        return LoopLagHealth(
            last_s=round(self._last, 4),
            max_s=round(self._max, 4),
            gc_collections=(g.counts[0], g.counts[1], g.counts[2]),
            gc_pause_s=(round(g.spent[0], 4), round(g.spent[1], 4), round(g.spent[2], 4)),
            gc_pause_max_s=round(g.longest, 4),
            gc_pause_max_cpu_s=round(g.longest_cpu, 4),
            gc_pause_max_collected=g.longest_collected,
            gc_pause_longest_s=(
                round(g.longest_of[0], 4),
                round(g.longest_of[1], 4),
                round(g.longest_of[2], 4),
            ),
        )

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(self._interval)
            lag = max(0.0, loop.time() - before - self._interval)
            self._last = lag
            self._max = max(self._max, lag)
            self._observe(lag)
            self._gc.flush()


class GCPauses:
    """Times the cyclic collector's runs through ``gc.callbacks`` (process-wide: installed
    once, removed on close). The callback runs inside the collection, in whatever thread
    triggered it, so it takes no lock: it adds up and keeps the pause for :meth:`flush`, which
    the loop calls to hand the pauses to ``observe`` (a Prometheus histogram, which locks)."""

    def __init__(self, observe: Callable[[int, float], None] | None = None) -> None:
        self._observe = observe
        self._began = self._began_cpu = 0.0
        self._pending: list[tuple[int, float]] = []
        self.counts = [0, 0, 0]
        self.spent = [0.0, 0.0, 0.0]
        self.longest = 0.0
        self.longest_of = [0.0, 0.0, 0.0]  # by generation
        # the longest one's CPU time in the thread that ran it: well below ``longest`` when
        # the process waited for a core (the OS's, not the collector's)
        self.longest_cpu = 0.0
        self.longest_collected = 0  # unreachable objects it found (and freed, inside it)

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        if self._observe is not None:
            for generation, took in pending:
                self._observe(generation, took)

    def install(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def remove(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began, self._began_cpu = time.perf_counter(), time.thread_time()
            return
        took = time.perf_counter() - self._began
        if took > self.longest:
            self.longest_cpu = time.thread_time() - self._began_cpu
            self.longest_collected = int(info.get("collected", 0))
        generation = min(max(int(info.get("generation", 0)), 0), 2)
        self.counts[generation] += 1
        self.spent[generation] += took
        self.longest = max(self.longest, took)
        self.longest_of[generation] = max(self.longest_of[generation], took)
        if len(self._pending) < MAX_PENDING:
            self._pending.append((generation, took))
